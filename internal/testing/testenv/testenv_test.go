package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

func TestBinDir(t *testing.T) {
	t.Setenv(BinDirEnv, "")
	d, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(d))
	if filepath.Base(d) != "bin" || filepath.Base(filepath.Dir(d)) != "_output" {
		t.Errorf("BinDir() = %s, want <root>/_output/bin", d)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("BinDir() = %s: no go.mod at %s", d, root)
	}
	t.Setenv(BinDirEnv, "/somewhere/else")
	if d, _ := BinDir(); d != "/somewhere/else" {
		t.Errorf("BinDir() = %s, want $%s", d, BinDirEnv)
	}
}

// endRecorder stands in for *testing.T to catch how Start ends a test.
type endRecorder struct {
	testing.TB
	skipped, failed string
}

func (r *endRecorder) Helper() {}
func (r *endRecorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *endRecorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// startWithoutBinaries runs Start against an empty binary directory.
func startWithoutBinaries(t *testing.T) *endRecorder {
	t.Setenv(BinDirEnv, t.TempDir())
	r := &endRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r, Options{})
		t.Error("Start returned without the binaries")
	}()
	<-done
	return r
}

func TestStartSkipsWithoutBinaries(t *testing.T) {
	t.Setenv(prereq.UnitEnv, "1")
	r := startWithoutBinaries(t)
	if !strings.Contains(r.skipped, "make k8s-test-bins") || !strings.Contains(r.skipped, "kube-apiserver") {
		t.Errorf("skip message %q does not name the binary and `make k8s-test-bins`", r.skipped)
	}
	if r.failed != "" {
		t.Errorf("under %s=1 Start failed instead of skipping: %s", prereq.UnitEnv, r.failed)
	}
}

// TestStartFailsWithoutBinaries: outside `make unit` a missing binary is a failure, so `make
// test` cannot pass by skipping every envtest.
func TestStartFailsWithoutBinaries(t *testing.T) {
	t.Setenv(prereq.UnitEnv, "")
	r := startWithoutBinaries(t)
	if !strings.Contains(r.failed, "make k8s-test-bins") || !strings.Contains(r.failed, "kube-apiserver") {
		t.Errorf("failure %q does not name the binary and `make k8s-test-bins`", r.failed)
	}
	if r.skipped != "" {
		t.Errorf("Start skipped outside %s=1: %s", prereq.UnitEnv, r.skipped)
	}
}

func TestBinary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	if err := os.WriteFile(filepath.Join(dir, "kube-proxy"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Binary(t, "kube-proxy"); got != filepath.Join(dir, "kube-proxy") {
		t.Errorf("Binary(kube-proxy) = %s, want it in %s", got, dir)
	}
}
