package netnsfind

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNotFound means no namespace under the directory holds the address (yet: a pod's sandbox
// may be reported before its CNI ran; callers retry on the next pod event or resync).
var ErrNotFound = errors.New("no network namespace holds the address")

// Scanner resolves pod IPs to namespace files under Dir, caching what it found.
type Scanner struct {
	Dir string // e.g. /var/run/netns

	mu    sync.Mutex
	cache map[netip.Addr]string
}

// Find returns the namespace file under s.Dir whose interfaces hold ip.
func (s *Scanner) Find(ip netip.Addr) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.cache[ip]; ok {
		// A pod IP is reused only after its sandbox is gone; recheck so a stale entry heals.
		if has, err := holds(p, ip); err == nil && has {
			return p, nil
		}
		delete(s.cache, ip)
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return "", fmt.Errorf("list network namespaces in %s: %w", s.Dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		p := filepath.Join(s.Dir, e.Name())
		has, err := holds(p, ip)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if has {
			if s.cache == nil {
				s.cache = map[netip.Addr]string{}
			}
			s.cache[ip] = p
			return p, nil
		}
	}
	return "", fmt.Errorf("%s in %s: %w", ip, s.Dir, errors.Join(append([]error{ErrNotFound}, errs...)...))
}

// Forget drops a cached answer (the pod is gone).
func (s *Scanner) Forget(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cache, ip)
}

// holds opens a netlink socket inside the namespace at path; the calling thread never
// switches namespace for longer than the socket creation.
func holds(path string, ip netip.Addr) (bool, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return false, fmt.Errorf("netlink in %s: %w", path, err)
	}
	defer h.Close()
	family := netlink.FAMILY_V4
	if ip.Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := h.AddrList(nil, family)
	if err != nil {
		return false, fmt.Errorf("addresses in %s: %w", path, err)
	}
	for _, a := range addrs {
		if got, ok := netip.AddrFromSlice(a.IP); ok && got.Unmap() == ip {
			return true, nil
		}
	}
	return false, nil
}
