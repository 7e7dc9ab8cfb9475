package netnsfind

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestFindRealNetns creates two namespaces with `ip netns add`, gives one an address, and points
// the scanner at a private directory holding bind mounts of both.
func TestFindRealNetns(t *testing.T) {
	prereq.Root(t, "network namespaces")
	prereq.Command(t, "ip")
	dir := t.TempDir()
	names := []string{fmt.Sprintf("svclbnf-a-%d", os.Getpid()), fmt.Sprintf("svclbnf-b-%d", os.Getpid())}
	for _, n := range names {
		ip(t, "netns", "add", n)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
		if err := os.Symlink(filepath.Join("/var/run/netns", n), filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	// lo: no kernel module needed (the dummy link type may be missing on CI kernels).
	ip(t, "-n", names[1], "addr", "add", "10.250.3.4/32", "dev", "lo")

	s := &Scanner{Dir: dir}
	got, err := s.Find(netip.MustParseAddr("10.250.3.4"))
	if err != nil || got != filepath.Join(dir, names[1]) {
		t.Fatalf("Find = %q, %v; want %s", got, err, names[1])
	}
	if _, err := s.Find(netip.MustParseAddr("10.250.3.5")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown address: %v, want ErrNotFound", err)
	}
	// The address moves (pod IP reused by a new sandbox): the cached answer must heal.
	ip(t, "-n", names[1], "addr", "del", "10.250.3.4/32", "dev", "lo")
	ip(t, "-n", names[0], "addr", "add", "10.250.3.4/32", "dev", "lo")
	got, err = s.Find(netip.MustParseAddr("10.250.3.4"))
	if err != nil || got != filepath.Join(dir, names[0]) {
		t.Fatalf("after move: Find = %q, %v; want %s", got, err, names[0])
	}
}

func TestFindMissingDir(t *testing.T) {
	s := &Scanner{Dir: filepath.Join(t.TempDir(), "absent")}
	if _, err := s.Find(netip.MustParseAddr("10.0.0.1")); err == nil {
		t.Fatal("missing directory: no error")
	}
}
