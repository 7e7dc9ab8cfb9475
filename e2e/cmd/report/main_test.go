package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture copies one of the report package's fixture evidence directories:
// the command writes its reports into the directory it reads.
func fixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "internal", "report", "testdata", name))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExitCodeIsTheVerdict(t *testing.T) {
	corrupt := fixture(t, "passed")
	if err := os.WriteFile(filepath.Join(corrupt, "legs", "reach.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	noGinkgo := fixture(t, "passed")
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"every selected leg passed", []string{"-dir", fixture(t, "passed")}, 0},
		{"a caller's failure fails a passing run", []string{"-dir", fixture(t, "passed"), "-failure", "make images failed"}, 1},
		{"legs failed or did not run", []string{"-dir", fixture(t, "failed")}, 1},
		{"no Ginkgo report: selection unknown", []string{"-dir", noGinkgo, "-ginkgo-json", filepath.Join(noGinkgo, "absent.json")}, 1},
		{"corrupt evidence", []string{"-dir", corrupt}, 2},
		{"unknown flag", []string{"-bogus"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(c.args, &stdout, &stderr); got != c.want {
				t.Fatalf("exit %d, want %d\nstderr: %s", got, c.want, stderr.String())
			}
			if c.want == 2 {
				return
			}
			dir := c.args[1]
			md, err := os.ReadFile(filepath.Join(dir, "report.md"))
			if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != string(md) {
				t.Error("stdout must be report.md")
			}
			status := map[int]string{0: "PASSED", 1: "FAILED"}[c.want]
			if !strings.HasPrefix(string(md), "# svclb acceptance legs: "+status) {
				t.Errorf("report.md does not say %s:\n%s", status, md)
			}
			if st, err := os.Stat(filepath.Join(dir, "report.html")); err != nil || st.Size() == 0 {
				t.Errorf("report.html: %v", err)
			}
		})
	}
}
