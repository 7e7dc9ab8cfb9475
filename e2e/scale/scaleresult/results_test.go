package scaleresult

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRead: what the tests write reads back; absent files are nil, not errors.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	if err := sampleGrowth().Write(dir); err != nil {
		t.Fatal(err)
	}
	if err := sampleOnDemand().Write(dir); err != nil {
		t.Fatal(err)
	}
	r := Read(dir)
	if len(r.Unread) != 0 || r.Growth == nil || len(r.Growth.Steps) != 2 || r.Held != nil || r.OnDemand == nil || r.OnDemand.Services != 5100 {
		t.Fatalf("Read = %+v", r)
	}
}

// TestReadBad: a file that is not JSON, one too large, one of another shape and a directory
// in a file's place are each an error naming the file; the readable one is still read.
func TestReadBad(t *testing.T) {
	for name, content := range map[string]string{
		GrowthFile:   `{"steps": [{"services": 1000,`,
		HeldFile:     `{"levels": []}` + strings.Repeat(" ", MaxFileBytes),
		OnDemandFile: `{"services": 5100, "steps": []}`,
	} {
		dir := t.TempDir()
		if err := sampleGrowth().Write(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := Read(dir)
		err := r.Unread[name]
		if err == nil || !strings.HasPrefix(err.Error(), name+": ") || len(r.Unread) != 1 {
			t.Errorf("%s: Unread %v, want one error naming the file", name, r.Unread)
		}
		if name != GrowthFile && r.Growth == nil {
			t.Errorf("%s unreadable: growth.json not read either", name)
		}
		t.Logf("%s: %v", name, err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, HeldFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Read(dir).Unread[HeldFile]; err == nil || !strings.Contains(err.Error(), HeldFile) {
		t.Errorf("a directory in held.json's place: %v", err)
	}
}
