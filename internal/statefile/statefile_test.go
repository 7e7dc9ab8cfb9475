package statefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// read runs Read with a deadline: what it must refuse, it must refuse at once, never hang.
func read(t *testing.T, path string, max int64) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := Read(path, max)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Read(%s) did not return in 10 s", path)
		return nil, nil
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", 101)), 0o644); err != nil {
		t.Fatal(err)
	}
	linkToZero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", linkToZero); err != nil {
		t.Fatal(err)
	}
	linkToGood := filepath.Join(dir, "link.json")
	if err := os.Symlink(good, linkToGood); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	if b, err := read(t, good, 100); err != nil || string(b) != `{"version":1}` {
		t.Errorf("good file: %q, %v", b, err)
	}
	if _, err := read(t, filepath.Join(dir, "missing.json"), 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := read(t, big, 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("101 bytes with a bound of 100: %v, want ErrTooLarge", err)
	}
	for name, path := range map[string]string{"symlink to /dev/zero": linkToZero, "symlink to a good file": linkToGood, "FIFO": fifo, "directory": dir} {
		if b, err := read(t, path, 100); err == nil {
			t.Errorf("%s: read %d bytes, want an error", name, len(b))
		}
	}
}

func TestWriteAtomicAndMoveAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	for _, content := range []string{"one\n", "two\n"} {
		if err := WriteAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := Read(path, 100); err != nil || string(b) != content {
			t.Fatalf("after writing %q: %q, %v", content, b, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	to, err := MoveAside(path)
	if err != nil || to != path+".corrupt" {
		t.Fatalf("MoveAside: %q, %v", to, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s still there after MoveAside: %v", path, err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != "two\n" {
		t.Errorf("moved file: %q, %v", b, err)
	}
}
