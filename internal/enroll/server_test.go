package enroll

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeHandler enrolls every pod; Add blocks until its context ends or release is closed.
type fakeHandler struct {
	release   chan struct{}
	inAdd     atomic.Int32
	maxInAdd  atomic.Int32
	mu        sync.Mutex
	deadlines []time.Duration // how far ahead each Add's deadline lay
}

func (f *fakeHandler) Decide(context.Context, Pod) (Decision, error) {
	return Decision{Enrolled: true}, nil
}

func (f *fakeHandler) Add(ctx context.Context, _ Pod) error {
	n := f.inAdd.Add(1)
	defer f.inAdd.Add(-1)
	for {
		m := f.maxInAdd.Load()
		if n <= m || f.maxInAdd.CompareAndSwap(m, n) {
			break
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		f.mu.Lock()
		f.deadlines = append(f.deadlines, time.Until(dl))
		f.mu.Unlock()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.release:
		return nil
	}
}

func (f *fakeHandler) Ready(context.Context, Pod) error { return nil }
func (f *fakeHandler) Del(context.Context, Pod) error   { return nil }

// flakyListener fails its first accepts the way a process out of file descriptors does.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// serve runs Serve on a socket in a temporary directory until the test ends.
func serve(t *testing.T, h Handler, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enroll.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return path
}

func pod() Pod { return Pod{Namespace: "ns", Name: "p", Netns: "/var/run/netns/cni-1"} }

// TestServeSurvivesAcceptErrors: a failed accept (EMFILE) is retried; the server, and so the
// agent, carries on.
func TestServeSurvivesAcceptErrors(t *testing.T) {
	h := &fakeHandler{release: make(chan struct{})}
	close(h.release)
	sock := serve(t, h, func(l net.Listener) net.Listener {
		fl := &flakyListener{Listener: l}
		fl.fails.Store(3)
		return fl
	})
	enrolled, err := Client{Socket: sock, Timeout: 10 * time.Second}.Add(context.Background(), pod(), nil)
	if err != nil || !enrolled {
		t.Fatalf("add after three failed accepts: enrolled=%v err=%v", enrolled, err)
	}
}

// TestServeBoundsWhatAPeerHolds: an oversized request is refused, a requested timeout is
// capped at MaxTimeout, and no more than MaxConns connections are served at once.
func TestServeBoundsWhatAPeerHolds(t *testing.T) {
	h := &fakeHandler{release: make(chan struct{})}
	sock := serve(t, h, nil)

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	big := Request{Op: OpAdd, Pod: pod()}
	big.Pod.Name = strings.Repeat("x", MaxRequestBytes)
	go func() { _ = json.NewEncoder(c).Encode(big) }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var r Reply
	if err := json.NewDecoder(c).Decode(&r); err != nil || !strings.Contains(r.Error, "malformed request") {
		t.Errorf("oversized request: reply %+v, %v; want it refused as malformed", r, err)
	}
	c.Close()

	// MaxConns+8 adds that each ask for an hour: all held by Add at most MaxConns at a time.
	var wg sync.WaitGroup
	errs := make(chan error, MaxConns+8)
	for range MaxConns + 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			req := Request{Op: OpAdd, Pod: pod(), TimeoutMillis: time.Hour.Milliseconds()}
			if err := json.NewEncoder(c).Encode(req); err != nil {
				errs <- err
				return
			}
			dec := json.NewDecoder(c)
			for {
				var r Reply
				if err := dec.Decode(&r); err != nil {
					return // the server closed it after its last reply
				}
			}
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for h.inAdd.Load() < MaxConns && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // room for a connection past the cap to show itself
	if got := h.maxInAdd.Load(); got != MaxConns {
		t.Errorf("%d adds held at once, want exactly MaxConns (%d)", got, MaxConns)
	}
	close(h.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.deadlines) != MaxConns+8 {
		t.Errorf("%d adds reached the handler, want %d", len(h.deadlines), MaxConns+8)
	}
	for _, d := range h.deadlines {
		if d > MaxTimeout {
			t.Errorf("an add's wait was %v, over MaxTimeout %v", d.Round(time.Second), MaxTimeout)
			break
		}
	}
}

// addrsHandler is fakeHandler whose decision names the node's addresses.
type addrsHandler struct {
	*fakeHandler
	addrs []netip.Addr
}

func (h addrsHandler) Decide(context.Context, Pod) (Decision, error) {
	return Decision{Enrolled: true, NodeAddrs: h.addrs}, nil
}

// TestAddGivesInstallTheNodeAddrs: the node's addresses of the agent's decision reach the
// plugin's install, which leaves them uncaptured.
func TestAddGivesInstallTheNodeAddrs(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("192.168.9.1")}
	h := addrsHandler{fakeHandler: &fakeHandler{release: make(chan struct{})}, addrs: want}
	close(h.release)
	sock := serve(t, h, nil)
	var got []netip.Addr
	enrolled, err := Client{Socket: sock, Timeout: 10 * time.Second}.Add(context.Background(), pod(), func(a []netip.Addr) error {
		got = a
		return nil
	})
	if err != nil || !enrolled {
		t.Fatalf("add: enrolled=%v err=%v", enrolled, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("install got node addresses %v, want %v", got, want)
	}
}
