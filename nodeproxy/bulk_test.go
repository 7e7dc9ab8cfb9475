package nodeproxy

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/nodeproxy/internal/netnsbind"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// meshedBulk is a captured pod, an echo backend in the server netns and a proxy
// serving the agent's capture listener: a svc: cluster for vip with the backend
// as its endpoint, and the passthrough for everything else.
type meshedBulk struct {
	pp  podPair
	p   *Proxy
	vip netip.AddrPort // reaches the echo through the svc: cluster
	// hostVIP reaches it through a svc: cluster without the local address selector,
	// dialled from the proxy's own netns, as svc: clusters were before they took the pod's.
	hostVIP netip.AddrPort
	echo    netip.AddrPort // reaches it through the passthrough (ORIGINAL_DST)
}

func newMeshedBulk(t testing.TB) meshedBulk {
	pp := newPodPair(t)
	echo := netip.AddrPortFrom(pp.backend.Addr(), 8081)
	l, err := netnsbind.Listen(context.Background(), pp.serverPath, echo, false)
	if err != nil {
		t.Fatal(err)
	}
	serveEach(t, l, func(c net.Conn) {
		io.Copy(c, c)                 //nolint:errcheck // splices, as the proxy does
		c.(*net.TCPConn).CloseWrite() //nolint:errcheck
	})
	a := startAgent(t)
	vip, hostVIP := netip.MustParseAddrPort("10.96.7.11:80"), netip.MustParseAddrPort("10.96.7.12:80")
	svc, hostSvc := clusterOf(vip), clusterOf(hostVIP)
	fromHost := translate.Cluster(hostSvc, contract.StatName("default", "bulkhost", 80), false)
	fromHost.UpstreamBindConfig = &corev3.BindConfig{SocketOptions: fromHost.GetUpstreamBindConfig().GetSocketOptions()}
	a.set(t, "1", map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {captureListener(translate.CapturedPod{Namespace: "default", Name: "client", NetnsPath: pp.clientPath}, translatetest.Options(true, true))},
		resourcev3.ClusterType:  {translate.PassthroughOriginalDst(), translate.Cluster(svc, contract.StatName("default", "bulk", 80), false), fromHost},
		resourcev3.EndpointType: {loadAssignment(svc, []netip.AddrPort{echo}), loadAssignment(hostSvc, []netip.AddrPort{echo})},
	})
	p := startProxy(t, a.sock)
	adstest.Eventually(t, "capture listener bound in the pod netns", func() bool { return len(activeListeners(p)) == 1 && p.ready.Load() })
	return meshedBulk{pp: pp, p: p, vip: vip, hostVIP: hostVIP, echo: echo}
}

// bulkEcho sends n bytes in chunk-sized writes from the pod to addr and reads the
// echo back on one connection, as e2e/perf's bulk echo does; it returns the time
// from the first write to the echo's EOF and how many bytes came back.
func bulkEcho(t testing.TB, nsPath string, addr netip.AddrPort, chunk []byte, n int64) (time.Duration, int64) {
	c, err := dialIn(nsPath, addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		var err error
		for sent := int64(0); sent < n && err == nil; sent += int64(len(chunk)) {
			_, err = c.Write(chunk[:min(int64(len(chunk)), n-sent)])
		}
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	var got int64
	buf := make([]byte, len(chunk))
	for {
		k, err := c.Read(buf)
		got += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	return time.Since(start), got
}

// BenchmarkMeshedBulk is one stream of bulk echo from a captured pod through the
// proxy, b.N MiB each way, over the passthrough (ORIGINAL_DST) and over a svc:
// cluster, whose upstream is dialled in the pod's netns, and over a svc: cluster
// dialled from the proxy's netns (svc-hostns): real veths and the real capture
// (the netns test's podPair). Run the two in the same run and
// interleave runs (-count) to compare them on a shared machine.
func BenchmarkMeshedBulk(b *testing.B) {
	m := newMeshedBulk(b)
	chunk := make([]byte, 256<<10)
	for _, bc := range []struct {
		name string
		addr netip.AddrPort
	}{{"passthrough", m.echo}, {"svc", m.vip}, {"svc-hostns", m.hostVIP}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := int64(b.N) << 20
			b.ResetTimer()
			d, got := bulkEcho(b, m.pp.clientPath, bc.addr, chunk, n)
			if got != n {
				b.Fatalf("echoed %d of %d bytes", got, n)
			}
			b.ReportMetric(float64(n)/(1<<20)/d.Seconds(), "MiB/s")
		})
	}
}

// readChars is the process's rchar (/proc/self/io): the bytes its read(2)
// calls returned, which splice(2) does not add to.
func readChars(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no task I/O accounting: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/self/io:\n%s", b)
	return 0
}

// TestBulkSplicesOnEveryClusterKind: a bulk stream through the passthrough and
// through a svc: cluster (dialled in the pod's netns or the proxy's) arrives
// whole, and the proxy moves it with splice(2), never through its own buffers:
// in this process only the client's reads of the echo reach read(2) (the echo
// backend splices too), so rchar grows by about the bytes sent, where a copy
// through user space (a counting or wrapping reader between the two sockets)
// would add twice that, once per direction.
func TestBulkSplicesOnEveryClusterKind(t *testing.T) {
	m := newMeshedBulk(t)
	const n = 64 << 20
	chunk := make([]byte, 256<<10)
	for _, bc := range []struct {
		name string
		addr netip.AddrPort
	}{{"passthrough", m.echo}, {"svc", m.vip}, {"svc-hostns", m.hostVIP}} {
		before := readChars(t)
		_, got := bulkEcho(t, m.pp.clientPath, bc.addr, chunk, n)
		read := readChars(t) - before
		if got != n {
			t.Errorf("%s: echoed %d of %d bytes", bc.name, got, n)
		}
		if read > n+n/2 {
			t.Errorf("%s: the process read(2) %d bytes for %d echoed: the proxy copied through user space, not splice(2)", bc.name, read, n)
		}
	}
}
