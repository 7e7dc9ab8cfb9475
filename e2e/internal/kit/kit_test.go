package kit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/fixtures/cluster"
)

// TestProgress: every line goes to the writer and to the artifacts' progress.log; a step that
// succeeds prints only its start, one that fails why, and its error names it.
func TestProgress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "artifacts")
	p := NewProgress("e2e", time.Now().Add(-2*time.Second), dir)
	var out bytes.Buffer
	p.out = &out
	p.Printf("hello %d", 1)
	if _, err := p.Step("setup: ok", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	_, err := p.Step("setup: bad", func() error { return errors.New("boom") })
	if err == nil || err.Error() != "setup: bad: boom" {
		t.Fatalf("Step error = %v", err)
	}
	want := regexp.MustCompile(`^\[e2e +2\.\ds\] hello 1
\[e2e +2\.\ds\] setup: ok
\[e2e +2\.\ds\] setup: bad
\[e2e +2\.\ds\] setup: bad FAILED after 0s: boom
$`)
	if !want.MatchString(out.String()) {
		t.Errorf("progress lines:\n%s", out.String())
	}
	file, err := os.ReadFile(filepath.Join(dir, ProgressFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(file) != out.String() {
		t.Errorf("%s:\n%s\nwant what stderr got:\n%s", ProgressFile, file, out.String())
	}
}

// TestProgressNoFile: an artifacts path that cannot be a directory leaves the lines on stderr.
func TestProgressNoFile(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if p := NewProgress("soak", time.Now(), notDir); p.file != nil {
		t.Fatal("a progress file under a regular file")
	}
}

func TestEnv(t *testing.T) {
	vars := map[string]string{"S": "x", "ON": "1", "N": "3", "NEG": "-1", "F": "2.5", "D": "1m30s", "BADD": "soon", "T": "100"}
	e := &Env{Lookup: func(k string) string { return vars[k] }}
	if e.String("S", "d") != "x" || e.String("UNSET", "d") != "d" || !e.On("ON") || e.On("S") {
		t.Error("String or On")
	}
	if e.Count("N", 7) != 3 || e.Count("UNSET", 7) != 7 || e.Positive("N", 1) != 3 || e.Float("F", 0) != 2.5 {
		t.Error("Count, Positive or Float")
	}
	if e.Duration("D", 0) != 90*time.Second || !e.Start("T").Equal(time.Unix(100, 0)) || time.Since(e.Start("UNSET")) > time.Minute {
		t.Error("Duration or Start")
	}
	if e.Err() != nil {
		t.Fatalf("Err before a bad value: %v", e.Err())
	}
	if e.Count("NEG", 4) != 4 || e.Duration("BADD", time.Second) != time.Second {
		t.Error("a bad value must give the default")
	}
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), `NEG="-1": want a count`) {
		t.Errorf("Err = %v, want the first bad variable", err)
	}
}

// TestSuite: a suite's switch, target, artifacts and start, with the defaults under the repo.
func TestSuite(t *testing.T) {
	vars := map[string]string{"X_ON": "1", "SVCLB_PROXY": "envoy", "X_START": "100"}
	e := &Env{Lookup: func(k string) string { return vars[k] }}
	got := e.Suite("/repo", SuiteVars{On: "X_ON", Artifacts: "X_ART", ArtifactsDir: "_artifacts/x", Start: "X_START"})
	want := Suite{Enabled: true, Target: Target{Kubeconfig: "/repo/_output/kubeconfig", Cluster: "svclb", Proxy: "envoy"},
		Artifacts: "/repo/_artifacts/x", Start: time.Unix(100, 0)}
	if got != want {
		t.Errorf("Suite = %+v, want %+v", got, want)
	}
}

// TestKubeconfigPrecedence: SVCLB_KUBECONFIG, then KUBECONFIG, then the file make cluster
// writes; a KUBECONFIG listing several files is an error naming it.
func TestKubeconfigPrecedence(t *testing.T) {
	for _, c := range []struct {
		name    string
		vars    map[string]string
		want    string
		wantErr bool
	}{
		{"neither", nil, "/repo/_output/kubeconfig", false},
		{"KUBECONFIG", map[string]string{"KUBECONFIG": "/home/u/.kube/config"}, "/home/u/.kube/config", false},
		{"SVCLB_KUBECONFIG wins", map[string]string{"KUBECONFIG": "/k", "SVCLB_KUBECONFIG": "/s"}, "/s", false},
		{"SVCLB_KUBECONFIG alone", map[string]string{"SVCLB_KUBECONFIG": "/s"}, "/s", false},
		{"a list", map[string]string{"KUBECONFIG": "/a:/b"}, "/a", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &Env{Lookup: func(k string) string { return c.vars[k] }}
			if got := e.Target("/repo").Kubeconfig; got != c.want {
				t.Errorf("Kubeconfig = %q, want %q", got, c.want)
			}
			if err := e.Err(); (err != nil) != c.wantErr || (err != nil && !strings.Contains(err.Error(), "KUBECONFIG")) {
				t.Errorf("Err = %v, want an error: %v", err, c.wantErr)
			}
		})
	}
}

// TestNodeAccess: SVCLB_NODE_ACCESS is docker, daemonset or empty (chosen per cluster);
// anything else is an error naming the variable.
func TestNodeAccess(t *testing.T) {
	for v, want := range map[string]cluster.NodeAccess{"": "", "docker": cluster.NodeAccessDocker, "daemonset": cluster.NodeAccessDaemonSet} {
		e := &Env{Lookup: func(k string) string { return map[string]string{"SVCLB_NODE_ACCESS": v}[k] }}
		if got := e.Target("/repo").NodeAccess; got != want || e.Err() != nil {
			t.Errorf("%q: %q %v", v, got, e.Err())
		}
	}
	e := &Env{Lookup: func(k string) string { return map[string]string{"SVCLB_NODE_ACCESS": "ssh"}[k] }}
	if e.Target("/repo"); e.Err() == nil || !strings.Contains(e.Err().Error(), `SVCLB_NODE_ACCESS="ssh": want docker or daemonset`) {
		t.Errorf("ssh: %v", e.Err())
	}
}

// TestRegistry: SVCLB_REGISTRY is a registry, or empty for kind-loaded images; anything else
// is an error naming the variable and why.
func TestRegistry(t *testing.T) {
	for v, want := range map[string]string{"": "svclb/echo:dev", "localhost:5000": "localhost:5000/svclb/echo:dev"} {
		e := &Env{Lookup: func(k string) string { return map[string]string{"SVCLB_REGISTRY": v}[k] }}
		if got := e.Target("/repo").Images.Ref("echo"); got != want || e.Err() != nil {
			t.Errorf("%q: %q %v", v, got, e.Err())
		}
	}
	e := &Env{Lookup: func(k string) string { return map[string]string{"SVCLB_REGISTRY": "https://r.example.com"}[k] }}
	if e.Target("/repo"); e.Err() == nil || !strings.Contains(e.Err().Error(), `SVCLB_REGISTRY="https://r.example.com": want a registry, or empty for kind-loaded images: no scheme`) {
		t.Errorf("a URL: %v", e.Err())
	}
}
