package suiterun

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeSuite writes a script standing in for the suite binary: it records its environment
// and each signal it receives, and on SIGINT writes a report and exits 1, as Ginkgo does.
// With ignore set it ignores SIGINT (a suite that does not stop).
func fakeSuite(t *testing.T, ignore bool) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	onInt := `echo INT >>"$SVCLB_ARTIFACTS/signals"; echo '[]' >"$SVCLB_ARTIFACTS/ginkgo.json"; exit 1`
	if ignore {
		onInt = `echo INT >>"$SVCLB_ARTIFACTS/signals"`
	}
	script := "#!/bin/bash\n" +
		`env | grep -E '^(SVCLB_|KEEP_CLUSTER)' | sort >"$SVCLB_ARTIFACTS/env"` + "\n" +
		`printf '%s\n' "$@" >"$SVCLB_ARTIFACTS/args"` + "\n" +
		"trap '" + onInt + "' INT\n" +
		`echo started >"$SVCLB_ARTIFACTS/started"` + "\n" +
		"for _ in $(seq 100); do sleep 0.1 & wait $!; done\nexit 0\n"
	bin = filepath.Join(dir, "e2e.test")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func testConfig(t *testing.T) Config {
	return Config{Kubeconfig: "/k", Cluster: "svclb", Artifacts: t.TempDir(), Proxy: "builtin",
		ProxyChoice: "--proxy builtin", Filter: "reach", Timeout: time.Minute, Start: time.Unix(100, 0)}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunnerRestoresOnSIGINT: a SIGINT (twice, as a terminal's Ctrl-C reaches the CLI and
// e2e/run.sh forwards it too) reaches the suite once; once the suite has exited the cluster
// is restored, and the result says so for the report.
func TestRunnerRestoresOnSIGINT(t *testing.T) {
	bin, dir := fakeSuite(t, false)
	cfg := testConfig(t)
	sigs := make(chan os.Signal, 2)
	var restoredAfterExit bool
	var out bytes.Buffer
	r := &Runner{Suite: bin, Dir: dir, Config: cfg, Out: &out, Signals: sigs,
		Restore: func(context.Context, io.Writer) error {
			_, err := os.Stat(filepath.Join(cfg.Artifacts, "ginkgo.json"))
			restoredAfterExit = err == nil
			return nil
		}}
	go func() {
		waitFile(t, filepath.Join(cfg.Artifacts, "started"))
		sigs <- syscall.SIGINT
		sigs <- syscall.SIGINT
	}()
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted != syscall.SIGINT || res.ExitCode != 1 || res.Killed || res.RestoreErr != nil {
		t.Fatalf("result %+v, want interrupted by SIGINT, exit 1, restored", res)
	}
	if !restoredAfterExit {
		t.Error("Restore ran before the suite had written its report")
	}
	if got := read(t, filepath.Join(cfg.Artifacts, "signals")); got != "INT\n" {
		t.Errorf("the suite received %q, want one INT", got)
	}
	if f := res.Failure(); !strings.Contains(f, "interrupted by SIGINT") || !strings.Contains(f, "restored") {
		t.Errorf("Failure() = %q", f)
	}
	if log := read(t, filepath.Join(cfg.Artifacts, "e2e.log")); !strings.Contains(log, "forwarding it to the suite once") {
		t.Errorf("e2e.log lacks the runner's lines:\n%s", log)
	}
}

// TestRunnerKillsAfterGrace: a suite that ignores the signal is killed once Grace has
// passed, and the cluster is restored all the same.
func TestRunnerKillsAfterGrace(t *testing.T) {
	bin, dir := fakeSuite(t, true)
	cfg := testConfig(t)
	sigs := make(chan os.Signal, 1)
	restored := false
	r := &Runner{Suite: bin, Dir: dir, Config: cfg, Out: io.Discard, Signals: sigs, Grace: 300 * time.Millisecond,
		Restore: func(context.Context, io.Writer) error { restored = true; return nil }}
	go func() {
		waitFile(t, filepath.Join(cfg.Artifacts, "started"))
		sigs <- syscall.SIGINT
	}()
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Killed || res.Interrupted != syscall.SIGINT || !restored {
		t.Fatalf("result %+v, restored %v: want killed after grace, restored", res, restored)
	}
}

// TestRunnerNoSignal: a run that ends on its own is not restored (the guard stays, as a run
// leaves it), and the suite got the environment and flags e2e/run.sh gave it.
func TestRunnerNoSignal(t *testing.T) {
	bin, dir := fakeSuite(t, false)
	script := read(t, bin)
	if err := os.WriteFile(bin, []byte(strings.Replace(script, "for _ in $(seq 100)", "for _ in $(seq 1)", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Keep = true
	r := &Runner{Suite: bin, Dir: dir, Config: cfg, Out: io.Discard, Signals: make(chan os.Signal),
		Restore: func(context.Context, io.Writer) error { t.Error("restored a run nobody interrupted"); return nil }}
	res, err := r.Run(context.Background())
	if err != nil || res.ExitCode != 0 || res.Interrupted != nil || res.Failure() != "" {
		t.Fatalf("result %+v, %v", res, err)
	}
	env := read(t, filepath.Join(cfg.Artifacts, "env"))
	for _, want := range []string{"SVCLB_E2E=1", "SVCLB_KUBECONFIG=/k", "SVCLB_CLUSTER=svclb", "SVCLB_PROXY=builtin",
		"SVCLB_ENVOY_VERSION=n/a", "SVCLB_E2E_START=100", "KEEP_CLUSTER=1", "SVCLB_ARTIFACTS=" + cfg.Artifacts} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("suite env lacks %s:\n%s", want, env)
		}
	}
	args := read(t, filepath.Join(cfg.Artifacts, "args"))
	for _, want := range []string{"^TestE2E$", "-ginkgo.label-filter=reach", "-ginkgo.json-report=" + filepath.Join(cfg.Artifacts, "ginkgo.json")} {
		if !strings.Contains(args, want+"\n") {
			t.Errorf("suite args lack %s:\n%s", want, args)
		}
	}
}
