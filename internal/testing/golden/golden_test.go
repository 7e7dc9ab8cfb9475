package golden

import (
	"os"
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

// TestCheckFiles: each file of a directory against testdata/<name>.golden of the working
// directory (the test's package).
func TestCheckFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	out := t.TempDir()
	for _, f := range []struct{ path, text string }{
		{filepath.Join(out, "a.md"), "a\n"}, {filepath.Join("testdata", "a.md.golden"), "a\n"},
		{filepath.Join(out, "b.md"), "b\n"}, {filepath.Join("testdata", "b.md.golden"), "not b\n"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	CheckFiles(t, out, "a.md")
	for _, name := range []string{"b.md", "missing.md"} {
		f := &fakeT{TB: t}
		CheckFiles(f, out, name)
		if !f.failed {
			t.Errorf("%s passed", name)
		}
	}
}
