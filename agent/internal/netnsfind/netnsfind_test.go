package netnsfind

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
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
	// The address moves (pod IP reused by a new sandbox): the next Find follows it.
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

// linked gives a test n namespaces, linked into a private directory as ns0, ns1, … (the
// scanner must not see other tests' namespaces).
func linked(t *testing.T, n int) (string, []*netnstest.NS) {
	t.Helper()
	prereq.Command(t, "ip")
	dir := t.TempDir()
	var nss []*netnstest.NS
	for i := 0; i < n; i++ {
		ns := netnstest.New(t)
		// The names sort in creation order: ns0 is what a first-match search would take.
		if err := os.Symlink(ns.Path(), filepath.Join(dir, fmt.Sprintf("ns%d", i))); err != nil {
			t.Fatal(err)
		}
		nss = append(nss, ns)
	}
	return dir, nss
}

func addAddr(t *testing.T, ns *netnstest.NS, cidr string) {
	t.Helper()
	ip(t, "-n", ns.Name(), "addr", "add", cidr, "dev", "lo")
}

// wantAmbiguous: an error, and one that names every candidate file.
func wantAmbiguous(t *testing.T, got string, err error, paths ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Find = %q, nil; want an error naming %v", got, paths)
	}
	for _, p := range paths {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	var amb *AmbiguousError
	if !errors.As(err, &amb) || !errors.Is(err, ErrAmbiguous) || !slices.Equal(amb.Paths, paths) {
		t.Errorf("error %v: want an *AmbiguousError (ErrAmbiguous) with paths %v", err, paths)
	}
}

// TestFindAmbiguous: a pod that adds its neighbour's IP to its own interface (here the first
// file in the directory) must not get the neighbour's answer, nor may the neighbour.
func TestFindAmbiguous(t *testing.T) {
	dir, nss := linked(t, 3)
	addAddr(t, nss[0], "10.250.3.4/32") // the thief
	addAddr(t, nss[2], "10.250.3.4/32") // the pod
	addAddr(t, nss[2], "10.250.3.6/32")
	// A file that is no namespace (a stale one, its mount gone) neither hides nor adds a holder.
	if err := os.WriteFile(filepath.Join(dir, "stale"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Scanner{Dir: dir}
	got, err := s.Find(netip.MustParseAddr("10.250.3.4"))
	wantAmbiguous(t, got, err, filepath.Join(dir, "ns0"), filepath.Join(dir, "ns2"))
	// The pod's other address is still its own.
	if got, err := s.Find(netip.MustParseAddr("10.250.3.6")); err != nil || got != filepath.Join(dir, "ns2") {
		t.Fatalf("unshared address: Find = %q, %v; want ns2", got, err)
	}
}

// TestFindSecondHolderLater: an answer given while one namespace held the address is not
// kept once a second one holds it too, whichever came first.
func TestFindSecondHolderLater(t *testing.T) {
	dir, nss := linked(t, 2)
	a := netip.MustParseAddr("10.250.3.4")
	s := &Scanner{Dir: dir}

	addAddr(t, nss[1], "10.250.3.4/32")
	if got, err := s.Find(a); err != nil || got != filepath.Join(dir, "ns1") {
		t.Fatalf("one holder: Find = %q, %v; want ns1", got, err)
	}
	addAddr(t, nss[0], "10.250.3.4/32") // a thief after the pod was found
	got, err := s.Find(a)
	wantAmbiguous(t, got, err, filepath.Join(dir, "ns0"), filepath.Join(dir, "ns1"))

	// The other order: the thief claims the address before the pod's sandbox holds it. The
	// first answer cannot tell (it is the thief); the pod's arrival must undo it.
	ip(t, "-n", nss[1].Name(), "addr", "del", "10.250.3.4/32", "dev", "lo")
	ip(t, "-n", nss[0].Name(), "addr", "del", "10.250.3.4/32", "dev", "lo")
	addAddr(t, nss[1], "10.250.3.4/32") // the thief, now ns1
	if got, err := s.Find(a); err != nil || got != filepath.Join(dir, "ns1") {
		t.Fatalf("claimed first: Find = %q, %v; want ns1", got, err)
	}
	addAddr(t, nss[0], "10.250.3.4/32")
	got, err = s.Find(a)
	wantAmbiguous(t, got, err, filepath.Join(dir, "ns0"), filepath.Join(dir, "ns1"))
}

// TestFindSnapshot: inside a Snapshot every Find answers from one read; after release, Find
// reads again.
func TestFindSnapshot(t *testing.T) {
	dir, nss := linked(t, 2)
	a, b := netip.MustParseAddr("10.250.3.4"), netip.MustParseAddr("10.250.3.5")
	s := &Scanner{Dir: dir}
	addAddr(t, nss[0], "10.250.3.4/32")

	release := s.Snapshot()
	if got, err := s.Find(a); err != nil || got != filepath.Join(dir, "ns0") {
		t.Fatalf("Find = %q, %v; want ns0", got, err)
	}
	addAddr(t, nss[1], "10.250.3.4/32")
	addAddr(t, nss[1], "10.250.3.5/32")
	if got, err := s.Find(a); err != nil || got != filepath.Join(dir, "ns0") {
		t.Fatalf("same snapshot: Find = %q, %v; want ns0 (the first read)", got, err)
	}
	if _, err := s.Find(b); !errors.Is(err, ErrNotFound) {
		t.Fatalf("same snapshot: added address: %v, want ErrNotFound", err)
	}
	release()

	got, err := s.Find(a)
	wantAmbiguous(t, got, err, filepath.Join(dir, "ns0"), filepath.Join(dir, "ns1"))
	if got, err := s.Find(b); err != nil || got != filepath.Join(dir, "ns1") {
		t.Fatalf("after release: Find = %q, %v; want ns1", got, err)
	}
}
