package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// fakeRepo is a repository root with the two binaries as scripts: the suite records its
// environment and flags, the renderer prints a verdict table and exits as told.
func fakeRepo(t *testing.T, reportExit int) (repo, suite, report string) {
	t.Helper()
	repo = t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "e2e"), 0o755); err != nil {
		t.Fatal(err)
	}
	suite = filepath.Join(repo, "e2e.test")
	report = filepath.Join(repo, "report")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte("#!/bin/bash\n"+s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(suite, `env | grep -E '^(SVCLB_|KEEP_CLUSTER)' | sort >"$SVCLB_ARTIFACTS/env"; printf '%s\n' "$@" >"$SVCLB_ARTIFACTS/args"; echo '[]' >"$SVCLB_ARTIFACTS/ginkgo.json"`+"\n")
	write(report, "echo \"VERDICT TABLE $*\"\nexit "+map[int]string{0: "0", 1: "1"}[reportExit]+"\n")
	return repo, suite, report
}

// TestRunFlags: run's flags reach the suite as e2e/run.sh's variables and flags did; a
// list of leg names is one label filter; a --kubeconfig wins over $KUBECONFIG; the run ends
// with the renderer's verdict table and its exit code.
func TestRunFlags(t *testing.T) {
	repo, suite, report := fakeRepo(t, 0)
	art := filepath.Join(t.TempDir(), "art")
	kc := writeKubeconfig(t)
	t.Setenv("KUBECONFIG", "/not/this")
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"run", "--repo", repo, "--suite-binary", suite, "--report-binary", report,
		"--kubeconfig", kc, "--legs", "reach affinity", "--legs", "drain", "--keep", "--artifacts", art, "--start", "100",
		"--kind-version", "v0.33.0", "--node-access", "daemonset"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	env, _ := os.ReadFile(filepath.Join(art, "env"))
	for _, want := range []string{"SVCLB_KUBECONFIG=" + kc, "KEEP_CLUSTER=1", "SVCLB_PROXY=builtin", "SVCLB_PROXY_CHOICE=--proxy builtin",
		"SVCLB_E2E_START=100", "SVCLB_KIND_VERSION=v0.33.0", "SVCLB_CLUSTER=svclb",
		"SVCLB_NODE_ACCESS=daemonset"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("suite env lacks %q:\n%s", want, env)
		}
	}
	args, _ := os.ReadFile(filepath.Join(art, "args"))
	if !strings.Contains(string(args), "-ginkgo.label-filter=reach,affinity,drain\n") {
		t.Errorf("suite args:\n%s", args)
	}
	if !strings.Contains(out.String(), "VERDICT TABLE -dir "+art+" -summary") || !strings.Contains(out.String(), "PASSED") {
		t.Errorf("output does not end with the verdict table:\n%s", out.String())
	}
	phases, _ := os.ReadFile(filepath.Join(art, "phases.tsv"))
	if !strings.Contains(string(phases), "suite build\t") || !strings.Contains(string(phases), "total\t") {
		t.Errorf("phases.tsv:\n%s", phases)
	}
}

// TestRunRefusesBadFlags: a bad value is a usage error (exit 2) naming it, before anything runs.
func TestRunRefusesBadFlags(t *testing.T) {
	repo, suite, report := fakeRepo(t, 0)
	kc := writeKubeconfig(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--proxy", "haproxy"}, `--proxy "haproxy"`},
		{[]string{"--context", "nope"}, `"nope"`},
		{[]string{"--timeout", "0s"}, "--timeout"},
		{[]string{"--node-access", "ssh"}, `--node-access: node access "ssh": want docker or daemonset`},
		{[]string{"--registry", "http://localhost:5000"}, `--registry "http://localhost:5000": no scheme`},
		{[]string{"--registry", "team"}, `--registry "team": host "team" has no dot or port`},
		{[]string{"--bogus"}, "unknown flag"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"run", "--repo", repo, "--suite-binary", suite, "--report-binary", report, "--kubeconfig", kc,
			"--artifacts", t.TempDir()}, c.args...)
		if code := Main(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestRunReportVerdict: a run whose report says FAILED exits 1.
func TestRunReportVerdict(t *testing.T) {
	repo, suite, report := fakeRepo(t, 1)
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"run", "--repo", repo, "--suite-binary", suite, "--report-binary", report,
		"--kubeconfig", writeKubeconfig(t), "--artifacts", t.TempDir()}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "FAILED") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}

// TestRunRegistry: --registry reaches the suite as SVCLB_REGISTRY; without it the variable is
// empty (kind-loaded), whatever the caller's environment held.
func TestRunRegistry(t *testing.T) {
	t.Cleanup(func() { images.Use(images.Source{}) })
	t.Setenv(contract.RegistryEnv, "stale.example.com")
	for flag, want := range map[string]string{"localhost:5000/ci": "localhost:5000/ci", "": ""} {
		repo, suite, report := fakeRepo(t, 0)
		art := filepath.Join(t.TempDir(), "art")
		args := []string{"run", "--repo", repo, "--suite-binary", suite, "--report-binary", report, "--kubeconfig", writeKubeconfig(t), "--artifacts", art}
		if flag != "" {
			args = append(args, "--registry", flag)
		}
		var out, errOut bytes.Buffer
		if code := Main(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("--registry %q: exit %d\n%s", flag, code, errOut.String())
		}
		env, _ := os.ReadFile(filepath.Join(art, "env"))
		if !strings.Contains(string(env), contract.RegistryEnv+"="+want+"\n") {
			t.Errorf("--registry %q: suite env lacks %s=%s:\n%s", flag, contract.RegistryEnv, want, env)
		}
	}
}

// TestImagesPushRefuses: images push needs a registry that parses, before it runs docker.
func TestImagesPushRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--registry is required"},
		{[]string{"--registry", "localhost:99999"}, `--registry "localhost:99999": port "99999"`},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"images", "push", "--docker", "/nonexistent/docker"}, c.args...)
		if code := Main(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", c.args, code, errOut.String(), c.want)
		}
	}
}
