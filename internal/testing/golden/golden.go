// Package golden compares a test's output with a file under testdata/ and,
// with -update, rewrites the file instead. Every golden test of the module
// uses it, so -update means one thing everywhere.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files from the tests' output")

// Check compares got with the golden file at path (relative to the test's
// package directory). With -update it writes got there first.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run the test with -update to create it)", path, err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("output differs from %s (-want +got); rerun with -update and review the diff:\n%s", path, d)
	}
}

// CheckFiles compares each file names in dir with its golden file, testdata/<name>.golden.
func CheckFiles(t testing.TB, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
			return
		}
		Check(t, filepath.Join("testdata", name+".golden"), b)
	}
}
