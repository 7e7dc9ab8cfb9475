package nodeproxy

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The tcp_proxy connect retries of the agent's svc: chain
// (max_connect_attempts contract.SvcMaxConnectAttempts), as
// source/common/tcp_proxy/tcp_proxy.cc Filter::onUpstreamEvent,
// onConnectTimeout, onRetryTimer, establishUpstreamConnection and
// onConnectMaxAttempts make them.

// TestRetryMovesToNextHost: round robin moves on at every attempt, so a
// Ready endpoint that refuses costs no caller a connection: every one of 12
// connections over 3 hosts, one of them dead, is answered, and the dead
// host's refusals show only in the cluster's connect failures.
func TestRetryMovesToNextHost(t *testing.T) {
	p, lis, _ := localProxy(t, nil, nil, []netip.AddrPort{echoServer(t, "a"), deadAddr(t), echoServer(t, "b")})
	for i := range 12 {
		if got := greet(t, lis); got != "a" && got != "b" {
			t.Fatalf("connection %d: %q, want a live backend's answer\n%s", i, got, statsText(p))
		}
	}
	if v := p.stats.value(clusterStat(localStat, "upstream_cx_connect_fail")); v < 1 {
		t.Fatalf("upstream_cx_connect_fail = %d: the dead host was never tried", v)
	}
	if v := p.stats.value(clusterStat(localStat, "upstream_cx_connect_attempts_exceeded")); v != 0 {
		t.Fatalf("upstream_cx_connect_attempts_exceeded = %d, want 0", v)
	}
}

// TestRetryExhaustedIsURX: after max_connect_attempts failed attempts the
// connection closes with UF then URX, and the cluster counts
// upstream_cx_connect_attempts_exceeded once, whatever the attempts.
func TestRetryExhaustedIsURX(t *testing.T) {
	dead := deadAddr(t)
	logAll := withAccessLog(func(al *accesslogv3.AccessLog, cfg *grpcalsv3.TcpGrpcAccessLogConfig) {
		al.Filter = nil
		cfg.CommonConfig.BufferSizeBytes = wrapperspb.UInt32(0)
	})
	a, lis := alsAgent(t, logAll, dead)
	if got := greet(t, lis); got != "" {
		t.Fatalf("a dead endpoint answered %q", got)
	}
	adstest.Eventually(t, "the UF,URX entry", func() bool {
		for _, m := range a.messages() {
			for _, e := range m.GetTcpLogs().GetLogEntry() {
				f := e.GetCommonProperties().GetResponseFlags()
				if f.GetUpstreamConnectionFailure() && f.GetUpstreamRetryLimitExceeded() && !f.GetNoHealthyUpstream() {
					return true
				}
			}
		}
		return false
	})
}

// TestRetryCountsAttempts: one connection to a dead only host makes every
// attempt, each a connect failure reported to outlier detection, and counts
// the exhaustion once.
func TestRetryCountsAttempts(t *testing.T) {
	p, lis, _ := localProxy(t, nil, nil, []netip.AddrPort{deadAddr(t)})
	if got := greet(t, lis); got != "" {
		t.Fatalf("a dead endpoint answered %q", got)
	}
	for stat, want := range map[string]int64{
		"upstream_cx_total":                     contract.SvcMaxConnectAttempts,
		"upstream_cx_connect_fail":              contract.SvcMaxConnectAttempts,
		"upstream_cx_connect_attempts_exceeded": 1,
	} {
		if got := p.stats.value(clusterStat(localStat, stat)); got != want {
			t.Errorf("%s = %d, want %d\n%s", stat, got, want, statsText(p))
		}
	}
}

// TestRetryLooksClusterUpAgain: each attempt looks the cluster up by name
// again; one removed while the first attempt waits for its connect timeout
// ends the connection as NC on the next, after one upstream attempt.
func TestRetryLooksClusterUpAgain(t *testing.T) {
	cl := translate.Cluster("", localStat, false)
	cl.ConnectTimeout = durationpb.New(300 * time.Millisecond)
	p, lis, name := localProxy(t, nil, cl, []netip.AddrPort{silentAddr(t)})
	go func() {
		// While the first attempt waits for the silent host.
		time.Sleep(100 * time.Millisecond)
		if err := p.applyClusters(nil, []string{name}); err != nil {
			t.Error(err)
		}
	}()
	if got := greet(t, lis); got != "" {
		t.Fatalf("answered %q", got)
	}
	for stat, want := range map[string]int64{
		clusterStat(localStat, "upstream_cx_total"):           1,
		clusterStat(localStat, "upstream_cx_connect_timeout"): 1,
		clusterStat(localStat, "upstream_cx_connect_fail"):    1,
		svcStat("downstream_cx_no_route"):                     1,
	} {
		if got := p.stats.value(stat); got != want {
			t.Errorf("%s = %d, want %d\n%s", stat, got, want, statsText(p))
		}
	}
}

// TestRetryAfterConnectTimeout: a host that drops SYNs costs the caller one
// connect_timeout, once: the attempt expires (upstream_cx_connect_timeout and
// upstream_cx_connect_fail) and the next one, on the next host, answers.
func TestRetryAfterConnectTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cl := translate.Cluster("", localStat, false)
	cl.ConnectTimeout = durationpb.New(timeout)
	p, lis, _ := localProxy(t, nil, cl, []netip.AddrPort{silentAddr(t), echoServer(t, "live")})
	var slow int
	for range 4 {
		start := time.Now()
		if got := greet(t, lis); got != "live" {
			t.Fatalf("got %q, want the live host", got)
		}
		if d := time.Since(start); d >= timeout {
			slow++
			if d > timeout+time.Second {
				t.Errorf("a connection took %v, want about one connect_timeout (%v)", d, timeout)
			}
		}
	}
	timeouts := p.stats.value(clusterStat(localStat, "upstream_cx_connect_timeout"))
	if timeouts < 1 || int64(slow) != timeouts || p.stats.value(clusterStat(localStat, "upstream_cx_connect_fail")) != timeouts {
		t.Fatalf("%d slow connections, %d connect timeouts\n%s", slow, timeouts, statsText(p))
	}
}

// TestRingHashRetriesSameHost: under ClientIP affinity (RING_HASH on the
// source address) every attempt hashes to the same host, so a dead one fails
// all of a connection's attempts, until outlier detection ejects it.
func TestRingHashRetriesSameHost(t *testing.T) {
	a, b := closableEcho(t, "a"), closableEcho(t, "b")
	p, lis, _ := localProxy(t, nil, translate.Cluster("", localStat, true), []netip.AddrPort{a.addr, b.addr})
	first := greet(t, lis)
	hashed := map[string]*closable{"a": a, "b": b}[first]
	if hashed == nil {
		t.Fatalf("got %q", first)
	}
	hashed.ln.Close()
	if got := greet(t, lis); got != "" {
		t.Fatalf("the hashed host, closed, answered %q", got)
	}
	if v := p.stats.value(clusterStat(localStat, "upstream_cx_connect_fail")); v != contract.SvcMaxConnectAttempts {
		t.Fatalf("upstream_cx_connect_fail = %d, want every attempt on the hashed host (%d)", v, contract.SvcMaxConnectAttempts)
	}
}

// TestUpstreamResetResetsDownstream: an established upstream that resets
// resets the client in turn (Filter::onUpstreamEvent, AbortReset on a
// RemoteReset); a FIN from the upstream stays a FIN.
func TestUpstreamResetResetsDownstream(t *testing.T) {
	backend := testServer(t, func(c net.Conn) {
		io.WriteString(c, "bye\n") //nolint:errcheck
		buf := make([]byte, 4)
		io.ReadFull(c, buf) //nolint:errcheck // the client's "rst?" or "fin?"
		if string(buf) == "rst?" {
			c.(*net.TCPConn).SetLinger(0) //nolint:errcheck
		}
		c.Close()
	})
	_, lis, _ := localProxy(t, nil, nil, []netip.AddrPort{backend})
	for _, tc := range []struct {
		ask       string
		wantReset bool
	}{{"rst?", true}, {"fin?", false}} {
		c, err := net.Dial("tcp4", lis.String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.ask) //nolint:errcheck
		_, err = io.ReadAll(c)
		c.Close()
		if reset := errors.Is(err, syscall.ECONNRESET); reset != tc.wantReset {
			t.Errorf("%s: the client's read ended with %v; want a reset: %v", tc.ask, err, tc.wantReset)
		}
	}
}

// silentAddr is a loopback port that drops SYNs: a listener with a backlog
// of 0 whose accept queue is full and never drained (tcp_conn_request drops
// a SYN while sk_acceptq_is_full), so a dial there waits for its timeout.
func silentAddr(t testing.TB) netip.AddrPort {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.AddrFrom4(sa.(*unix.SockaddrInet4).Addr), uint16(sa.(*unix.SockaddrInet4).Port))
	// Fill the accept queue until a dial times out.
	for range 8 {
		c, err := net.DialTimeout("tcp4", addr.String(), 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatalf("%s kept accepting: no silent port", addr)
	return addr
}

// closable is an echo server whose listener a test closes.
type closable struct {
	ln   net.Listener
	addr netip.AddrPort
}

func closableEcho(t *testing.T, name string) *closable {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.WriteString(c, name+"\n") //nolint:errcheck
				io.Copy(c, c)                //nolint:errcheck
			}()
		}
	}()
	return &closable{ln: ln, addr: netip.MustParseAddrPort(ln.Addr().String())}
}
