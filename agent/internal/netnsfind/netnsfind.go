package netnsfind

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNotFound means no namespace under the directory holds the address (yet: a pod's sandbox
// may be reported before its CNI ran; callers retry on the next pod event or resync).
var ErrNotFound = errors.New("no network namespace holds the address")

// ErrAmbiguous means more than one namespace holds the address. A pod with NET_ADMIN can add
// its neighbour's IP to its own interface; taking either file would be a guess that may bind
// the neighbour's capture listener inside the thief, so neither is taken. The error is an
// *AmbiguousError naming the candidates.
var ErrAmbiguous = errors.New("more than one network namespace holds the address")

// AmbiguousError names the namespace files that all hold IP.
type AmbiguousError struct {
	IP    netip.Addr
	Paths []string // sorted
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s: %v: %s", e.IP, ErrAmbiguous, strings.Join(e.Paths, ", "))
}

func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// Scanner resolves pod IPs to namespace files under Dir. Each Find reads every namespace (a
// netlink dump each: every holder must be seen to know there is one), except inside Snapshot.
// There is deliberately no cache across reads: an answer kept from an earlier read cannot see
// a second holder that appeared since, nor the real pod's sandbox appearing after another
// namespace claimed its address first.
type Scanner struct {
	Dir string // e.g. /var/run/netns

	mu   sync.Mutex
	held bool
	view *view // the held read; nil until the first Find inside Snapshot
}

// view is one read of every namespace under a directory.
type view struct {
	holders map[netip.Addr][]string // address → files holding it, in directory order
	errs    []error                 // files that could not be read
	err     error                   // the directory itself could not be listed
}

// Snapshot makes every Find until release answer from one read of the namespaces, made at the
// first of them: a caller resolving many pods pays one read, not one per pod, and judges them
// all on the same view. Calls do not nest.
func (s *Scanner) Snapshot() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held, s.view = true, nil
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.held, s.view = false, nil
	}
}

// Find returns the namespace file under s.Dir whose interfaces hold ip: ErrNotFound if none
// does, an *AmbiguousError (ErrAmbiguous) if more than one does.
func (s *Scanner) Find(ip netip.Addr) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view
	if v == nil {
		v = read(s.Dir)
		if s.held {
			s.view = v
		}
	}
	if v.err != nil {
		return "", v.err
	}
	switch paths := v.holders[ip.Unmap()]; len(paths) {
	case 0:
		return "", fmt.Errorf("%s in %s: %w", ip, s.Dir, errors.Join(append([]error{ErrNotFound}, v.errs...)...))
	case 1:
		// Unreadable files do not make a single holder ambiguous: the container runtime makes
		// the files here, a pod cannot, and a stale one (its mount gone) must not block every
		// pod on the node.
		return paths[0], nil
	default:
		return "", &AmbiguousError{IP: ip, Paths: paths}
	}
}

func read(dir string) *view {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return &view{err: fmt.Errorf("list network namespaces in %s: %w", dir, err)}
	}
	v := &view{holders: map[netip.Addr][]string{}}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		addrs, err := addresses(p)
		if err != nil {
			v.errs = append(v.errs, err)
			continue
		}
		for _, a := range addrs {
			// One file listed once per address, though it may hold it on several interfaces.
			if h := v.holders[a]; len(h) == 0 || h[len(h)-1] != p {
				v.holders[a] = append(h, p)
			}
		}
	}
	return v
}

// addresses opens a netlink socket inside the namespace at path; the calling thread never
// switches namespace for longer than the socket creation.
func addresses(path string) ([]netip.Addr, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	defer h.Close()
	list, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses in %s: %w", path, err)
	}
	out := make([]netip.Addr, 0, len(list))
	for _, a := range list {
		if got, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, got.Unmap())
		}
	}
	return out, nil
}
