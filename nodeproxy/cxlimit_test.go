package nodeproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// startProxyWith runs a Proxy with o (its xDS identity filled in) against the agent at sock.
func startProxyWith(t *testing.T, sock string, o Options) *Proxy {
	t.Helper()
	o.XDSSocket, o.NodeID, o.NodeCluster = sock, testNode, contract.NodeCluster
	p := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }() //nolint:errcheck
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// adminGet returns the status and body of GET path on the admin address.
func adminGet(t *testing.T, admin netip.AddrPort, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get("http://" + admin.String() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// statLine is stat's "name: value" line in /stats ("" when absent).
func statLine(stats, stat string) string {
	for _, l := range strings.Split(stats, "\n") {
		if strings.HasPrefix(l, stat+": ") {
			return l
		}
	}
	return ""
}

// heldConn is a proxied connection kept open: its greeting came through.
func heldConn(t *testing.T, addr netip.AddrPort, want string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	b := make([]byte, 64)
	n, err := c.Read(b)
	if got := strings.TrimSpace(string(b[:n])); got != want {
		t.Fatalf("connection to %s: got %q (%v), want the greeting %q", addr, got, err, want)
	}
	c.SetReadDeadline(time.Time{}) //nolint:errcheck
	return c
}

// TestGlobalDownstreamConnectionLimit: with --max-downstream-connections N the
// proxy holds N downstream connections across all its listeners; the N+1th is
// accepted and closed at once and counted as
// listener.<address>.downstream_global_cx_overflow on the listener that took it,
// as Envoy's global_downstream_max_connections monitor does
// (tcp_listener_impl.cc TcpListenerImpl::onSocketEvent, rejectCxOverGlobalLimit;
// active_tcp_listener.cc ActiveTcpListener::onReject). While at the limit /ready
// answers 503 (the admin's own connections are not counted, as Envoy's are not);
// once one closes, /ready is 200 again and a new connection is served.
func TestGlobalDownstreamConnectionLimit(t *testing.T) {
	const limit = 3
	a := startAgent(t)
	backendA, backendB := echoServer(t, "a"), echoServer(t, "b")
	lisA, lisB, admin := freePort(t), freePort(t), freePort(t)
	stat := func(port uint16) string { return contract.StatName("ns", fmt.Sprintf("web%d", port), 80) }
	var ls, cs, eps []types.Resource
	cs = append(cs, translate.PassthroughOriginalDst())
	for _, x := range []struct {
		pod     string
		lis     netip.AddrPort
		backend netip.AddrPort
	}{{"pod-a", lisA, backendA}, {"pod-b", lisB, backendB}} {
		ls = append(ls, captureListener(translate.CapturedPod{Namespace: "ns", Name: x.pod}, loopbackOptions(false), onLoopback(x.lis)))
		cs = append(cs, translate.Cluster(clusterOf(x.lis), stat(x.lis.Port()), false))
		eps = append(eps, loadAssignment(clusterOf(x.lis), []netip.AddrPort{x.backend}))
	}
	a.set(t, "1", map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: ls, resourcev3.ClusterType: cs, resourcev3.EndpointType: eps})
	logs := newCountingHandler()
	p := startProxyWith(t, a.sock, Options{AdminAddr: admin.String(), MaxDownstreamConnections: limit, Logger: slog.New(logs)})
	adstest.Eventually(t, "both listeners bound", func() bool { return len(activeListeners(p)) == 2 && p.ready.Load() })
	if code, body := adminGet(t, admin, "/ready"); code != http.StatusOK {
		t.Fatalf("/ready below the limit: %d %q", code, body)
	}

	// The limit is the proxy's, not a listener's: two on A and one on B fill it.
	first := heldConn(t, lisA, "a")
	heldConn(t, lisA, "a")
	heldConn(t, lisB, "b")

	// The N+1th, on B: accepted and closed before any byte, never proxied.
	over, err := net.DialTimeout("tcp4", lisB.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	start := time.Now()
	b := make([]byte, 64)
	n, err := over.Read(b)
	if n != 0 || !isClosed(err) {
		t.Fatalf("connection %d (over the limit %d): read %q, %v; want it closed at once", limit+1, limit, b[:n], err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("connection over the limit closed after %v; want at once", d)
	}
	_, stats := adminGet(t, admin, "/stats")
	for _, want := range []string{
		listenerStat(lisB, "downstream_global_cx_overflow") + ": 1",
		listenerStat(lisA, "downstream_global_cx_overflow") + ": 0",
		// Rejected before the listener took it: not a downstream connection of B.
		listenerStat(lisB, "downstream_cx_total") + ": 1",
	} {
		if got := statLine(stats, strings.SplitN(want, ":", 2)[0]); got != want {
			t.Errorf("/stats: %q, want %q\n%s", got, want, stats)
		}
	}
	if code, body := adminGet(t, admin, "/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready at the limit: %d %q, want 503", code, body)
	}

	// A flood over the limit is counted, one by one, and logged once.
	const flood = 20
	for range flood {
		c, err := net.DialTimeout("tcp4", lisA.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
		if n, err := c.Read(b); n != 0 || !isClosed(err) {
			t.Fatalf("connection over the limit on A: read %q, %v; want it closed at once", b[:n], err)
		}
		c.Close()
	}
	if v := p.stats.value(listenerStat(lisA, "downstream_global_cx_overflow")); v != flood {
		t.Errorf("overflow on A = %d after %d connections over the limit", v, flood)
	}
	if n := logs.count(logOverflow); n != 1 {
		t.Errorf("%d log lines %q for %d connections over the limit; want 1 (rate-limited); logged %v", n, logOverflow, flood+1, logs.n)
	}

	// One closes: the proxy is ready again and serves a new connection, on either listener.
	first.Close()
	adstest.Eventually(t, "/ready 200 once a connection closed", func() bool {
		code, _ := adminGet(t, admin, "/ready")
		return code == http.StatusOK
	})
	heldConn(t, lisB, "b")
	if code, body := adminGet(t, admin, "/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready at the limit again: %d %q, want 503", code, body)
	}
	if v := p.stats.value(listenerStat(lisB, "downstream_global_cx_overflow")); v != 1 {
		t.Errorf("overflow on B = %d after the new connection, want still 1", v)
	}
}

// listenerStat names a stat of the listener on ap (Envoy's listener.<address>.<stat>).
func listenerStat(ap netip.AddrPort, stat string) string {
	return fmt.Sprintf("listener.%s_%d.%s", ap.Addr(), ap.Port(), stat)
}

// isClosed: the peer closed (FIN, or a reset of an unread close), not a timeout.
func isClosed(err error) bool {
	var ne net.Error
	if err == nil {
		return false
	}
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return errors.Is(err, io.EOF) || !timedOut
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func newCountingHandler() *countingHandler { return &countingHandler{n: map[string]int{}} }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Message]++
	return nil
}

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[msg]
}
