package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKindVersion: the flag wins; without a kind on PATH the repository's _output/bin/kind
// answers (the one `make cluster` uses); without either the report says unknown.
func TestKindVersion(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no kind on PATH
	repo := t.TempDir()
	if got := kindVersion(t.Context(), "v9.9.9", repo); got != "v9.9.9" {
		t.Errorf("given: %q", got)
	}
	if got := kindVersion(t.Context(), "", repo); !strings.HasPrefix(got, "unknown") {
		t.Errorf("no kind anywhere: %q, want unknown…", got)
	}
	bin := filepath.Join(repo, "_output", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kind"), []byte("#!/bin/sh\necho 'kind v0.33.0 go1.26.8 linux/amd64'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := kindVersion(t.Context(), "", repo); got != "v0.33.0" {
		t.Errorf("_output/bin/kind: %q, want v0.33.0", got)
	}
}
