package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

// NS is a network namespace owned by one test.
type NS struct {
	name   string
	handle netns.NsHandle
}

// New creates a namespace, brings its loopback up, and deletes it when the
// test ends. Not root, it ends the test the prereq way: a skip under
// `make unit`, a failure under `make test`.
func New(t testing.TB) *NS {
	t.Helper()
	prereq.Root(t, "creates a network namespace")
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("netnstest: random name: %v", err)
	}
	name := fmt.Sprintf("svclbt-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))

	if err := prepareRunDir(); err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	h, err := create(name)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	ns := &NS{name: name, handle: h}
	t.Cleanup(func() {
		_ = ns.handle.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("netnstest: delete %s: %v", name, err)
		}
	})

	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatalf("netnstest: netlink handle in %s: %v", name, err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("netnstest: loopback up in %s: %v", name, err)
	}
	return ns
}

// runDir holds the named namespaces: iproute2's NETNS_RUN_DIR, vishvananda/netns's bind mount path.
const runDir = "/var/run/netns"

var prepared struct {
	once sync.Once
	err  error
}

// prepareRunDir makes runDir a shared mount point as `ip netns add` does (iproute2's
// ip/ipnetns.c, netns_add: MS_SHARED|MS_REC, and on EINVAL the directory bound onto itself
// first). Without it, a namespace bound onto a file of the plain directory before another
// process's first `ip netns add` (tests of other packages run in parallel) ends up under that
// self-bind: no unmount through the path reaches it any more, and unlinking the file fails with
// EBUSY. Two processes doing this first step at once can still stack two binds; iproute2 has the
// same window.
func prepareRunDir() error {
	prepared.once.Do(func() {
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			prepared.err = fmt.Errorf("create %s: %w", runDir, err)
			return
		}
		for bound := false; ; bound = true {
			err := unix.Mount("", runDir, "none", unix.MS_SHARED|unix.MS_REC, "")
			if err == nil {
				return
			}
			if !errors.Is(err, unix.EINVAL) || bound {
				prepared.err = fmt.Errorf("make %s a shared mount: %w", runDir, err)
				return
			}
			if err := unix.Mount(runDir, runDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				prepared.err = fmt.Errorf("bind %s onto itself: %w", runDir, err)
				return
			}
		}
	})
	return prepared.err
}

// create makes a named namespace without leaving any reusable thread in it:
// netns.NewNamed switches the current thread, so it runs on a fresh locked
// goroutine whose thread is switched back (or discarded) afterwards.
func create(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{err: fmt.Errorf("current namespace: %w", err)}
			return
		}
		defer func() { _ = orig.Close() }() // a handle of the namespace we return to: nothing to do on error
		h, err := netns.NewNamed(name)
		if err != nil {
			_ = netns.Set(orig)
			c <- result{err: fmt.Errorf("create namespace %s: %w", name, err)}
			runtime.Goexit() // the thread may be in an unknown namespace: discard it
		}
		if err := netns.Set(orig); err != nil {
			c <- result{h: h}
			runtime.Goexit()
		}
		runtime.UnlockOSThread()
		c <- result{h: h}
	}()
	r := <-c
	return r.h, r.err
}

// Name is the namespace's name (ip netns exec NAME ...).
func (n *NS) Name() string { return n.name }

// Path is the namespace's file, e.g. for nsenter --net=PATH.
func (n *NS) Path() string { return runDir + "/" + n.name }

// Fd is an open file descriptor of the namespace (for libraries that take
// one, e.g. nftables.WithNetNSFd). It stays valid until the test ends.
func (n *NS) Fd() int { return int(n.handle) }

// Do runs fn on a locked OS thread that has entered the namespace, and
// returns that thread to the original namespace afterwards. Goroutines that
// fn starts do NOT run in the namespace.
func (n *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// A fresh goroutine so that a thread that cannot switch back is
		// dropped (Goexit while locked) instead of reused.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer func() { _ = orig.Close() }() // a handle of the namespace we return to: nothing to do on error
		if err := netns.Set(n.handle); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter %s: %w", n.name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leave %s: %w (after fn: %v)", n.name, err, ferr)
			runtime.Goexit() // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Command returns a command that runs program inside the namespace (through
// nsenter, so the child never depends on which thread forked it).
func (n *NS) Command(program string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "--", program}, args...)...)
}

// LoopbackAddr adds a to the namespace's lo as a /32 (IPv4) or /128: a test listens there on
// an address that stands for a remote one, such as a Service VIP.
func (ns *NS) LoopbackAddr(t testing.TB, a netip.Addr) {
	t.Helper()
	nl, err := netlink.NewHandleAt(ns.handle)
	if err != nil {
		t.Fatalf("netnstest: netlink handle in %s: %v", ns.name, err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}})
	}
	if err != nil {
		t.Fatalf("netnstest: add %s to lo in %s: %v", a, ns.name, err)
	}
}
