package evidence

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	redOK := &Run{Mode: Red, MetRed: true}
	greenOK := &Run{Mode: Green, MetGreen: true}
	cases := []struct {
		name       string
		red, green *Run
		want       Verdict
	}{
		{"pass", redOK, greenOK, Pass},
		{"green in both proves nothing", &Run{Mode: Red, MetGreen: true, MetRed: false}, greenOK, ProvesNothing},
		// Even if the red check also matched, a green-looking red run wins.
		{"green-looking red beats red match", &Run{Mode: Red, MetGreen: true, MetRed: true}, greenOK, ProvesNothing},
		{"wrong red", &Run{Mode: Red}, greenOK, RedUnexpected},
		{"green failed", redOK, &Run{Mode: Green, Summary: "0/10 replies"}, GreenFailed},
		{"green error", redOK, &Run{Mode: Green, MetGreen: true, Error: "timeout"}, GreenFailed},
		{"red error", &Run{Mode: Red, Error: "exec failed"}, greenOK, Incomplete},
		{"no red", nil, greenOK, Incomplete},
		{"no green", redOK, nil, Incomplete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := Judge(c.red, c.green)
			if got != c.want {
				t.Fatalf("Judge = %q (%s), want %q", got, reason, c.want)
			}
			if got.Failed() == (c.want == Pass) {
				t.Fatalf("Failed() = %v for %q", got.Failed(), got)
			}
		})
	}
}

func TestDirRoundTrip(t *testing.T) {
	d := Dir(t.TempDir())
	if s, err := d.Load(); err != nil || s.Env != nil || len(s.Legs) != 0 || len(s.Phases) != 0 {
		t.Fatalf("empty dir: %+v, %v", s, err)
	}
	for _, name := range []string{"passthrough", "reach", "zz-extra", "drain"} {
		l := &Leg{Name: name, Red: &Run{Mode: Red, MetRed: true, Backends: map[string]int{"a": 1}}}
		if err := d.WriteLeg(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteEnv(&Env{Proxy: "builtin", Nodes: []Node{{Name: "n1", Zone: "zone-a"}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPhase("cluster create", 61500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPhase("leg reach red", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := d.AddPhase("bad\tname", time.Second); err == nil {
		t.Fatal("a tab in a phase name must be refused")
	}
	s, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range s.Legs {
		names = append(names, l.Name)
	}
	if got, want := names, []string{"reach", "drain", "passthrough", "zz-extra"}; !equal(got, want) {
		t.Fatalf("leg order %v, want %v", got, want)
	}
	if s.Legs[0].Red.Backends["a"] != 1 || s.Env.Proxy != "builtin" || s.Env.Nodes[0].Zone != "zone-a" {
		t.Fatalf("round trip lost data: %+v %+v", s.Legs[0].Red, s.Env)
	}
	if len(s.Phases) != 2 || s.Phases[0] != (Phase{"cluster create", 61.5}) {
		t.Fatalf("phases %+v", s.Phases)
	}
}

func TestLoadRejectsBadInput(t *testing.T) {
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "phases.tsv"), []byte("images 12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(d).Load(); err == nil {
		t.Fatal("a phases line without a tab must be an error")
	}
	d = t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "legs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "legs", "reach.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(d).Load(); err == nil {
		t.Fatal("a truncated leg file must be an error")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
