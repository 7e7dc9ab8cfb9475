package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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

// skipRecorder stands in for *testing.T to catch Start's skip.
type skipRecorder struct {
	testing.TB
	skipped string
}

func (r *skipRecorder) Helper() {}
func (r *skipRecorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *skipRecorder) Fatalf(format string, args ...any) {
	r.TB.Errorf(format, args...)
	runtime.Goexit()
}

func TestStartSkipsWithoutBinaries(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	r := &skipRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r, Options{})
		t.Error("Start returned without the binaries")
	}()
	<-done
	if !strings.Contains(r.skipped, "make k8s-test-bins") || !strings.Contains(r.skipped, "kube-apiserver") {
		t.Errorf("skip message %q does not name the binary and `make k8s-test-bins`", r.skipped)
	}
}
