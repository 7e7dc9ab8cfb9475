package evidence

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	held := Cut{Service: "legs/reach", Before: map[string]int{"w1": 0}, After: map[string]int{"w1": 0}}
	restored := Cut{Service: "legs/reach", Before: map[string]int{"w1": 0}, After: map[string]int{"w1": 0}, Redeletions: map[string]int{"w1": 1}}
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
		// kube-proxy restored a cut Service: the run measured kube-proxy.
		{"restored during red", &Run{Mode: Red, MetRed: true, Cuts: []Cut{restored}}, greenOK, Incomplete},
		{"restored during green", redOK, &Run{Mode: Green, MetGreen: true, Cuts: []Cut{restored}}, Incomplete},
		{"held through both", &Run{Mode: Red, MetRed: true, Cuts: []Cut{held}}, &Run{Mode: Green, MetGreen: true, Cuts: []Cut{held}}, Pass},
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

func TestJudgeControl(t *testing.T) {
	unchanged := func(mode Mode) *Run { return &Run{Mode: mode, MetGreen: true, MetRed: true} }
	for _, c := range []struct {
		name       string
		red, green *Run
		want       Verdict
	}{
		{"unchanged in both", unchanged(Red), unchanged(Green), Pass},
		{"red changed", &Run{Mode: Red}, unchanged(Green), RedUnexpected},
		{"green broke", unchanged(Red), &Run{Mode: Green}, GreenFailed},
		{"green error", unchanged(Red), &Run{Mode: Green, MetGreen: true, Error: "exec"}, GreenFailed},
		{"no green", unchanged(Red), nil, Incomplete},
		{"red error", &Run{Mode: Red, Error: "exec"}, unchanged(Green), Incomplete},
	} {
		if got, reason := JudgeControl(c.red, c.green); got != c.want {
			t.Errorf("%s: JudgeControl = %q (%s), want %q", c.name, got, reason, c.want)
		}
	}
}

func TestCutHeld(t *testing.T) {
	cases := []struct {
		name string
		cut  Cut
		held bool
		why  string
	}{
		{"cut before and after", Cut{Service: "l/s", Before: map[string]int{"a": 0, "b": 0}, After: map[string]int{"a": 0, "b": 0}}, true, ""},
		{"objects after", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 4}}, false, "4 kube-proxy ClusterIP entries of it on a after the run"},
		{"objects before", Cut{Service: "l/s", Before: map[string]int{"b": 2}, After: map[string]int{"b": 0}}, false, "2 kube-proxy ClusterIP entries of it on b before the run"},
		// kube-proxy's syncs rewrite its objects and the guard cuts them
		// again within milliseconds: the guard working, the cut held.
		{"restored by a sync, re-cut at once", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 0},
			Redeletions: map[string]int{"a": 2}, SlowestRedeletion: map[string]float64{"a": 0.005}}, true, ""},
		// A restore between the two readings that stood a second: nft
		// alone would not show it.
		{"restored, re-cut late", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 0},
			Redeletions: map[string]int{"a": 2}, SlowestRedeletion: map[string]float64{"a": 2}}, false, "restored 2× on a during the run, one standing up to 2s"},
		{"restored, re-cut beyond the histogram", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 0},
			Redeletions: map[string]int{"a": 1}, SlowestRedeletion: map[string]float64{"a": math.Inf(1)}}, false, "beyond the histogram's last bucket"},
		{"restored, latency unknown", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 0}, Redeletions: map[string]int{"a": 1}},
			false, "re-cut after an unknown time"},
		// reach-after-resync restarts kube-proxy on purpose.
		{"expected restore", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 0}, Redeletions: map[string]int{"a": 1}, RestoreExpected: true}, true, ""},
		{"expected restore, not re-cut", Cut{Service: "l/s", Before: map[string]int{"a": 0}, After: map[string]int{"a": 3}, Redeletions: map[string]int{"a": 1}, RestoreExpected: true},
			false, "3 kube-proxy ClusterIP entries of it on a after the run"},
	}
	for _, c := range cases {
		held, why := c.cut.Held()
		if held != c.held || !strings.Contains(why, c.why) || (c.held && why != "") {
			t.Errorf("%s: Held() = %v, %q; want %v, %q", c.name, held, why, c.held, c.why)
		}
		r := &Run{Cuts: []Cut{c.cut}}
		if h, _ := r.CutHeld(); h != c.held {
			t.Errorf("%s: CutHeld() = %v", c.name, h)
		}
	}
	fast := Cut{Service: "l/s", Redeletions: map[string]int{"a": 2, "b": 0}, SlowestRedeletion: map[string]float64{"a": 0.005}}
	if got := fast.Restores(); got != "kube-proxy's syncs restored l/s 2× on a (re-cut within 5ms) and the guard cut it again" {
		t.Errorf("Restores() = %q", got)
	}
	if h, why := (&Run{}).CutHeld(); !h || why != "" {
		t.Errorf("a run without cut Services: CutHeld() = %v, %q", h, why)
	}
}

func TestApplyChecks(t *testing.T) {
	// A reach-like node: green wants the svc: chain and cluster, red the passthrough.
	checks := func(svc, pass, cluster float64) []Check {
		return []Check{
			{Node: "w1", What: "tcp.cap_svc.downstream_cx_total", Got: svc, Green: AtLeast(10), Red: Exactly(0)},
			{Node: "w1", What: "tcp.cap_passthrough_svc.downstream_cx_total", Got: pass, Green: Exactly(0), Red: AtLeast(10)},
			{Node: "w1", What: "cluster.svc.l.s.80.upstream_cx_total", Got: cluster, Green: AtLeast(10), Red: Exactly(0)},
			{Node: "w1", What: "tcp.cap_svc.downstream_cx_no_route", Got: 0, Green: Exactly(0)},
		}
	}
	for _, c := range []struct {
		name                   string
		metRed, metGreen       bool
		checks                 []Check
		wantRed, wantGreen     bool
		failingRed, failingGrn int
	}{
		{"green path", false, true, checks(10, 0, 10), false, true, 3, 0},
		{"red path", true, false, checks(0, 10, 0), true, false, 0, 3},
		// Replies alone are not green: they came through kube-proxy.
		{"replies through the passthrough", true, true, checks(0, 10, 0), true, false, 0, 3},
		{"svc chain but no cluster", false, true, checks(10, 0, 3), false, false, 3, 1},
		{"the leg's own measure said no", false, false, checks(10, 0, 10), false, false, 3, 0},
		{"no checks", true, true, nil, true, true, 0, 0},
	} {
		r := &Run{MetRed: c.metRed, MetGreen: c.metGreen, Checks: c.checks}
		r.ApplyChecks()
		if r.MetRed != c.wantRed || r.MetGreen != c.wantGreen {
			t.Errorf("%s: MetRed %v MetGreen %v, want %v %v", c.name, r.MetRed, r.MetGreen, c.wantRed, c.wantGreen)
		}
		if n := len(r.Failing(Red)); n != c.failingRed {
			t.Errorf("%s: %d checks fail red, want %d", c.name, n, c.failingRed)
		}
		if n := len(r.Failing(Green)); n != c.failingGrn {
			t.Errorf("%s: %d checks fail green, want %d", c.name, n, c.failingGrn)
		}
	}
	// The verdict's reason names what failed.
	red := &Run{Mode: Red, MetRed: true, Checks: checks(0, 10, 0)}
	green := &Run{Mode: Green, MetGreen: true, Summary: "10/10 replies", Checks: checks(10, 0, 3)}
	red.ApplyChecks()
	green.ApplyChecks()
	v, reason := Judge(red, green)
	if v != GreenFailed || !strings.Contains(reason, "w1: cluster.svc.l.s.80.upstream_cx_total +3 (green wants ≥ 10)") {
		t.Errorf("Judge = %q, %q", v, reason)
	}
}

func TestWant(t *testing.T) {
	for _, c := range []struct {
		w    Want
		got  float64
		ok   bool
		text string
	}{
		{AtLeast(3), 3, true, "≥ 3"}, {AtLeast(3), 2, false, "≥ 3"},
		{Exactly(0), 0, true, "= 0"}, {Exactly(0), 1, false, "= 0"}, {Exactly(2.5), 2.5, true, "= 2.5"},
		{Want{}, -7, true, "—"},
	} {
		if c.w.Holds(c.got) != c.ok || c.w.String() != c.text {
			t.Errorf("%+v on %g: Holds %v String %q, want %v %q", c.w, c.got, c.w.Holds(c.got), c.w.String(), c.ok, c.text)
		}
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
	legNames := func(s *Set) []string {
		var names []string
		for _, l := range s.Legs {
			names = append(names, l.Name)
		}
		return names
	}
	// Evidence older than order.json: name order.
	s, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := legNames(s), []string{"drain", "passthrough", "reach", "zz-extra"}; s.Order != nil || !equal(got, want) {
		t.Fatalf("without order.json: order %v, legs %v, want %v", s.Order, got, want)
	}
	// The run's order; a leg it does not list after the others.
	order := []string{"reach", "drain", "passthrough", "affinity"}
	if err := d.WriteOrder(order); err != nil {
		t.Fatal(err)
	}
	if s, err = d.Load(); err != nil {
		t.Fatal(err)
	}
	if got, want := legNames(s), []string{"reach", "drain", "passthrough", "zz-extra"}; !equal(s.Order, order) || !equal(got, want) {
		t.Fatalf("with order.json: order %v, legs %v, want %v", s.Order, got, want)
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
	d = t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "order.json"), []byte(`{"reach": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(d).Load(); err == nil {
		t.Fatal("an order.json that is not a list of names must be an error")
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
