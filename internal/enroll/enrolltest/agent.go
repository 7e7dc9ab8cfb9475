package enrolltest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Agent is a fake agent serving the enrollment protocol.
type Agent struct {
	Socket string
	// Decider answers "enrolled?"; nil enrolls every pod.
	Decider func(enroll.Pod) enroll.Decision
	// NoListener makes add never bind the listener (the proxy is stuck).
	NoListener bool

	mu        sync.Mutex
	adds      []enroll.Pod
	dels      []enroll.Pod
	listeners map[string]net.Listener // by netns path
}

// Start serves a on a socket in a temporary directory until the test ends.
func Start(t testing.TB, a *Agent) *Agent {
	t.Helper()
	a.Socket = filepath.Join(t.TempDir(), "enroll.sock")
	a.listeners = map[string]net.Listener{}
	ln, err := enroll.Listen(a.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- enroll.Serve(ctx, ln, a, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fake agent: %v", err)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, l := range a.listeners {
			l.Close()
		}
	})
	return a
}

// Adds and Dels are the pods the plugin reported, in order.
func (a *Agent) Adds() []enroll.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]enroll.Pod(nil), a.adds...)
}
func (a *Agent) Dels() []enroll.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]enroll.Pod(nil), a.dels...)
}

// Decide implements enroll.Handler.
func (a *Agent) Decide(_ context.Context, pod enroll.Pod) (enroll.Decision, error) {
	if a.Decider == nil {
		return enroll.Decision{Enrolled: true}, nil
	}
	return a.Decider(pod), nil
}

// Add implements enroll.Handler: bind (unless NoListener), then wait as the agent does.
func (a *Agent) Add(ctx context.Context, pod enroll.Pod) error {
	a.mu.Lock()
	a.adds = append(a.adds, pod)
	_, bound := a.listeners[pod.Netns]
	a.mu.Unlock()
	if !a.NoListener && !bound {
		l, err := BindCapturePort(pod.Netns)
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.listeners[pod.Netns] = l
		a.mu.Unlock()
	}
	return enroll.WaitListening(ctx, pod.Netns, contract.CapturePort, 10*time.Millisecond)
}

// Ready implements enroll.Handler.
func (a *Agent) Ready(ctx context.Context, pod enroll.Pod) error {
	return enroll.WaitListening(ctx, pod.Netns, contract.CapturePort, 10*time.Millisecond)
}

// Del implements enroll.Handler: the listener goes.
func (a *Agent) Del(_ context.Context, pod enroll.Pod) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dels = append(a.dels, pod)
	for path, l := range a.listeners {
		if pod.Netns == "" || path == pod.Netns {
			l.Close()
			delete(a.listeners, path)
		}
	}
	return nil
}

// BindCapturePort binds :CapturePort in the netns at path from a thread that enters it briefly.
func BindCapturePort(path string) (net.Listener, error) {
	type res struct {
		l   net.Listener
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked if the switch back fails: the thread is dropped
		orig, err := netns.Get()
		if err != nil {
			c <- res{err: err}
			return
		}
		defer orig.Close()
		ns, err := netns.GetFromPath(path)
		if err != nil {
			c <- res{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			c <- res{err: err}
			return
		}
		l, err := net.Listen("tcp4", fmt.Sprintf(":%d", contract.CapturePort))
		if err := netns.Set(orig); err != nil {
			c <- res{err: err}
			return
		}
		runtime.UnlockOSThread()
		c <- res{l: l, err: err}
	}()
	r := <-c
	return r.l, r.err
}
