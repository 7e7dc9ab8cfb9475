package golden

import (
	"path/filepath"
	"testing"
)

// fakeT records failures instead of stopping the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	*update = true
	Check(t, path, []byte("a\nb\n"))
	*update = false
	Check(t, path, []byte("a\nb\n"))
	f := &fakeT{TB: t}
	Check(f, path, []byte("a\nc\n"))
	if !f.failed {
		t.Error("a differing output passed")
	}
	f = &fakeT{TB: t}
	Check(f, filepath.Join(t.TempDir(), "missing"), nil)
	if !f.failed {
		t.Error("a missing golden file passed")
	}
}
