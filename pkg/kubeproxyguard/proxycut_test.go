package kubeproxyguard

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The proxy cut's traffic tests dial from clientIP, inside the pod range (10.244.0.0/16), so
// kube-proxy's service chains do not mark the connection for masquerade: its DNAT is all
// they do. The endpoints' addresses are the namespace's own, served by one listener on
// endpointPort, which answers with the address it was reached at.
const (
	clientIP     = "10.244.1.99"
	endpointPort = "8080"
)

// proxyCutNet gives ns an interface holding clientIP and the endpoint addresses, a route to
// the Service range through it (a node's default route, as far as a ClusterIP is concerned),
// and a listener on 0.0.0.0:endpointPort that writes the local address of each connection
// it accepts: what kube-proxy's DNAT sent it to.
func proxyCutNet(t *testing.T, ns *netnstest.NS, endpoints ...string) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		if out, err := ns.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("link", "add", "eth0", "type", "veth", "peer", "name", "void0")
	run("link", "set", "eth0", "up")
	run("link", "set", "void0", "up")
	for _, a := range append([]string{clientIP}, endpoints...) {
		run("addr", "add", a+"/32", "dev", "eth0")
	}
	run("route", "add", "10.96.0.0/12", "dev", "eth0")
	var l net.Listener
	if err := ns.Do(func() (err error) {
		l, err = net.Listen("tcp4", "0.0.0.0:"+endpointPort)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, c.LocalAddr().String())
			_ = c.Close()
		}
	}()
}

// dialIn connects to addr from clientIP inside ns, with SO_MARK mark (0: none), as the node
// proxy's passthrough does with contract.ProxyUpstreamMark, and returns what the endpoint
// answered (its address).
func dialIn(ns *netnstest.NS, addr string, mark int) (string, error) {
	var reply string
	err := ns.Do(func() error {
		d := net.Dialer{
			Timeout:   5 * time.Second,
			LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientIP)},
			Control: func(_, _ string, rc syscall.RawConn) error {
				if mark == 0 {
					return nil
				}
				var serr error
				if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark) }); err != nil {
					return err
				}
				return serr
			},
		}
		c, err := d.Dial("tcp4", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		reply = string(b)
		return err
	})
	return reply, err
}

// expectReset: a connection to addr with mark is refused by a TCP reset.
func expectReset(t *testing.T, ns *netnstest.NS, addr string, mark int, what string) {
	t.Helper()
	reply, err := dialIn(ns, addr, mark)
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("%s: dial %s with mark %#x: reply %q, err %v; want a reset (ECONNREFUSED)", what, addr, mark, reply, err)
	}
}

// expectDNAT: a connection to addr with mark reaches one of endpoints through kube-proxy's
// DNAT.
func expectDNAT(t *testing.T, ns *netnstest.NS, addr string, mark int, what string, endpoints ...string) {
	t.Helper()
	reply, err := dialIn(ns, addr, mark)
	if err != nil || !slices.Contains(endpoints, reply) {
		t.Errorf("%s: dial %s with mark %#x: reply %q, err %v; want one of %v (kube-proxy's DNAT)", what, addr, mark, reply, err, endpoints)
	}
}

// listGuardTable is `nft list table ip svclb-guard`, canonical ("" when absent).
func listGuardTable(t testing.TB, ns *netnstest.NS) string {
	t.Helper()
	out, err := ns.Command("nft", "list", "table", "ip", contract.GuardTable).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "No such file or directory") {
			return ""
		}
		t.Fatalf("nft list table ip %s: %v\n%s", contract.GuardTable, err, out)
	}
	return canonical(string(out))
}

var counterRE = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// withoutCounters drops the counts of a listing's counters, which connections change.
func withoutCounters(s string) string { return counterRE.ReplaceAllString(s, "counter") }

// startProxyGuard runs a Guard in proxy-cut mode in ns until the test ends, as the DaemonSet
// runs it (RestoreUnchosen).
func startProxyGuard(t testing.TB, ns *netnstest.NS, svcs ...types.NamespacedName) *Guard {
	t.Helper()
	g, err := New(Options{NodeName: "test", NetNS: ns.Fd(), Resync: time.Hour, Logger: testLogger(t), RestoreUnchosen: true, Cut: contract.GuardCutProxy})
	if err != nil {
		t.Fatal(err)
	}
	g.SetServices(svcs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = g.Close()
	})
	return g
}

// TestProxyCutV134 runs the proxy cut against kube-proxy's v1.34 ruleset (as in TestGuardV134)
// in a throwaway netns: the guard writes its own table (golden: the set holds the chosen
// Services' ClusterIP . port, the rule resets the node proxy's mark before kube-proxy's DNAT)
// and leaves kube-proxy's byte for byte. A connection with the node proxy's mark to a chosen
// Service's ClusterIP is reset; the same connection without the mark, and a marked one to a
// Service not chosen, are DNATed by kube-proxy to an endpoint. /status says, per Service, the
// proxy cut's elements and, for the node, how many connections it reset; kube-proxy's
// restores write nothing of the guard's table again.
func TestProxyCutV134(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	proxyCutNet(t, ns, "10.244.1.10", "10.244.2.20", "10.244.2.23")
	before := listTable(t, ns)
	demo, otherDemo := "10.96.100.100:80", "10.96.40.40:80"
	demoEndpoints := []string{"10.244.1.10:8080", "10.244.2.20:8080"}

	// Before any guard: kube-proxy serves everyone, marked or not.
	expectDNAT(t, ns, demo, contract.ProxyUpstreamMark, "no guard", demoEndpoints...)

	g := startProxyGuard(t, ns, chosen134...)
	settle(t, g) // a pass of the chosen set has committed
	want := listGuardTable(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.34-proxy-cut.golden"), []byte(want))
	if got := listTable(t, ns); got != before {
		t.Fatalf("the proxy cut changed kube-proxy's table:\n%s", lineDiff(before, got))
	}

	expectReset(t, ns, demo, contract.ProxyUpstreamMark, "chosen, marked")
	expectDNAT(t, ns, demo, 0, "chosen, unmarked", demoEndpoints...)
	expectDNAT(t, ns, demo, contract.ProxyUpstreamMark+1, "chosen, another mark", demoEndpoints...)
	expectDNAT(t, ns, otherDemo, contract.ProxyUpstreamMark, "not chosen, marked", "10.244.2.23:8080")

	settle(t, g)
	st := g.Status()
	if st.Cut != contract.GuardCutProxy || st.ProxyCut == nil || st.ProxyCut.Resets != 1 {
		t.Errorf("status: cut %q, proxyCut %+v; want proxy and 1 reset", st.Cut, st.ProxyCut)
	}
	wantCut := map[string][]string{
		"default/demo": {"10.96.100.100 . 80"}, "default/empty": {"10.96.135.185 . 5353"},
		"default/sticky": {"10.96.20.20 . 8080"}, "default/local": {"10.96.30.30 . 5353"},
		"default/remote-only": {"10.96.50.50 . 9000"},
	}
	for _, s := range st.Services {
		n := s.Namespace + "/" + s.Name
		if s.State != StateClean || s.Cut != contract.GuardCutProxy || !slices.Equal(s.ProxyCut, wantCut[n]) || len(s.Deleted) != 0 || s.Deletions != 1 {
			t.Errorf("%s: state %s, cut %q, proxyCut %v, deleted %v, deletions %d; want clean, proxy, %v, none, 1", n, s.State, s.Cut, s.ProxyCut, s.Deleted, s.Deletions, wantCut[n])
		}
	}

	// kube-proxy's full syncs rewrite its own table only: nothing to do.
	for range 3 {
		load(t, ns, "kube-proxy-v1.34-restore.nft")
	}
	settle(t, g)
	if got := withoutCounters(listGuardTable(t, ns)); got != withoutCounters(want) {
		t.Errorf("after kube-proxy's restores:\n%s", lineDiff(withoutCounters(want), got))
	}
	for _, s := range g.Status().Services {
		if s.Deletions != 1 || s.Redeletions != 0 {
			t.Errorf("%s/%s after kube-proxy's restores: %d set writes, %d re-cuts; want 1, 0", s.Namespace, s.Name, s.Deletions, s.Redeletions)
		}
	}
	expectReset(t, ns, demo, contract.ProxyUpstreamMark, "chosen, marked, after the restores")
}

// TestProxyCutFollowsTheChosenSet: a Service chosen later joins the set, one no longer chosen
// leaves it (its marked connections reach kube-proxy again), and a table that is not the
// guard's shape (its rule deleted) is written anew.
func TestProxyCutFollowsTheChosenSet(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	proxyCutNet(t, ns, "10.244.1.10", "10.244.2.20", "10.244.2.23")
	demo, otherDemo := "10.96.100.100:80", "10.96.40.40:80"
	g := startProxyGuard(t, ns, svc("default/demo"))
	elements := func() []string {
		var out []string
		for _, l := range strings.Split(listGuardTable(t, ns), "\n") {
			if l = strings.TrimSuffix(strings.TrimSpace(l), ","); strings.HasPrefix(l, "10.") {
				out = append(out, l)
			}
		}
		return out
	}
	expectElements := func(what string, want ...string) {
		t.Helper()
		if _, ok := waitFor(5*time.Second, func() bool { return slices.Equal(elements(), want) }); !ok {
			t.Fatalf("%s: set %v, want %v", what, elements(), want)
		}
	}
	expectElements("demo", "10.96.100.100 . 80")
	expectReset(t, ns, demo, contract.ProxyUpstreamMark, "demo chosen")

	g.SetServices([]types.NamespacedName{svc("default/demo"), svc("other/demo")})
	expectElements("demo and other/demo", "10.96.100.100 . 80", "10.96.40.40 . 80")
	expectReset(t, ns, otherDemo, contract.ProxyUpstreamMark, "other/demo chosen")

	g.SetServices([]types.NamespacedName{svc("other/demo")})
	expectElements("other/demo", "10.96.40.40 . 80")
	expectDNAT(t, ns, demo, contract.ProxyUpstreamMark, "demo no longer chosen", "10.244.1.10:8080", "10.244.2.20:8080")

	nft(t, ns, "flush", "chain", "ip", contract.GuardTable, proxyCutChain)
	settle(t, g)
	expectElements("rule flushed", "10.96.40.40 . 80")
	expectReset(t, ns, otherDemo, contract.ProxyUpstreamMark, "after the table was written anew")
}

// TestCutModeSwitch: a proxy cut replacing an all cut puts every entry the all cut overwrote
// back as kube-proxy wrote it (its table is kube-proxy's again, byte for byte) and refuses the
// same ports to the node proxy; an all cut replacing a proxy cut cuts kube-proxy's entries
// again and deletes the guard's table, so nothing of the proxy cut is left behind.
func TestCutModeSwitch(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	load(t, ns, "kube-proxy-v1.34-ports.nft")
	kubeProxy := listTable(t, ns)
	multi := svc("default/multi")
	chosen := append(slices.Clone(chosen134), multi)
	c := conn(t, ns)

	all := cutByGoneGuard(t, ns) // chosen134, cut for everyone
	loadScript(t, ns, cutEveryPort(kubeProxy, multiIP))
	if all == kubeProxy {
		t.Fatal("the all cut changed nothing")
	}

	ctx, cancel := context.WithCancel(t.Context())
	g, err := New(Options{NodeName: "test", NetNS: ns.Fd(), Resync: time.Hour, Logger: testLogger(t), RestoreUnchosen: true, Cut: contract.GuardCutProxy})
	if err != nil {
		t.Fatal(err)
	}
	g.SetServices(chosen)
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var got string
	if _, ok := waitFor(5*time.Second, func() bool { got = listTable(t, ns); return got == kubeProxy }); !ok {
		t.Fatalf("proxy cut after an all cut: kube-proxy's table is not kube-proxy's:\n%s", lineDiff(kubeProxy, got))
	}
	settle(t, g)
	expectPorts(t, g, multi, multiCut, multiKept)
	for _, s := range g.Status().Services {
		if s.Namespace+"/"+s.Name == "default/multi" && !slices.Equal(s.ProxyCut, []string{multiIP + " . 80", multiIP + " . 9153"}) {
			t.Errorf("default/multi: proxyCut %v, want only its TCP ports other than 53", s.ProxyCut)
		}
	}
	if listGuardTable(t, ns) == "" {
		t.Fatal("no proxy cut table")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = g.Close()

	g2 := startGuard(t, ns, time.Hour, chosen...)
	waitClean(t, c, chosen)
	settle(t, g2)
	if got := listGuardTable(t, ns); got != "" {
		t.Errorf("all cut after a proxy cut: table ip %s left:\n%s", contract.GuardTable, got)
	}
	want := withCut(all, multiIP+" . tcp . 80", multiIP+" . tcp . 9153")
	if got := listTable(t, ns); got != want {
		t.Errorf("all cut after a proxy cut:\n%s", lineDiff(want, got))
	}
}

// TestProxyCutWithRealKubeProxy runs the proxy cut next to a real kube-proxy v1.34 (nftables
// mode, as in TestGuardWithRealKubeProxy) against a real apiserver: of two Services, the
// labelled one is refused to the node proxy's marked connections (a TCP reset) while an
// unmarked connection to it, and a marked one to the other, are DNATed by kube-proxy to
// their endpoints; kube-proxy's table keeps every entry as it wrote it, through its restart
// (a full sync), and it counts no failed sync.
func TestProxyCutWithRealKubeProxy(t *testing.T) {
	const node = "node-a"
	ns, kp, kube, kubeconfig := realKubeProxy(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	demo, keep := svc("default/demo"), svc("default/keep")
	vips := map[types.NamespacedName]string{}
	for s, ep := range map[types.NamespacedName]string{demo: "10.244.1.10", keep: "10.244.2.20"} {
		lbls := map[string]string{}
		if s == demo {
			lbls[Label] = LabelValue
		}
		created, err := kube.CoreV1().Services(s.Namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: lbls},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vips[s] = created.Spec.ClusterIP + ":80"
		setEndpoints(t, kube, s, ep)
	}
	proxyCutNet(t, ns, "10.244.1.10", "10.244.2.20")
	synced := func(what string) {
		t.Helper()
		if _, ok := waitFor(60*time.Second, func() bool {
			mfs, err := kubeProxyMetrics(ns)
			return err == nil && mfs[kubeProxySyncDuration] != nil
		}); !ok {
			t.Fatalf("%s: kube-proxy's /metrics has no %s", what, kubeProxySyncDuration)
		}
	}
	stopKP := startKubeProxy(t, ns, kp, kubeconfig, node)
	c := conn(t, ns)
	both := []types.NamespacedName{demo, keep}
	if _, ok := waitFor(60*time.Second, func() bool { return len(onPath(t, c, both)) == 2 }); !ok {
		t.Fatalf("kube-proxy did not program both Services: %v", onPath(t, c, both))
	}
	synced("started")
	expectDNAT(t, ns, vips[demo], contract.ProxyUpstreamMark, "no guard", "10.244.1.10:8080")

	g := startProxyGuard(t, ns)
	watched := make(chan error, 1)
	go func() { watched <- WatchServices(ctx, kube, g) }()
	defer func() { cancel(); <-watched }() //nolint:errcheck // the watch ends with ctx's error
	cut := func() bool {
		for _, s := range g.Status().Services {
			return s.State == StateClean && len(s.ProxyCut) == 1
		}
		return false
	}
	if _, ok := waitFor(10*time.Second, cut); !ok {
		t.Fatalf("demo not cut: %+v", g.Status().Services)
	}
	check := func(what string) {
		t.Helper()
		expectReset(t, ns, vips[demo], contract.ProxyUpstreamMark, what+": demo, marked")
		expectDNAT(t, ns, vips[demo], 0, what+": demo, unmarked", "10.244.1.10:8080")
		expectDNAT(t, ns, vips[keep], contract.ProxyUpstreamMark, what+": keep, marked", "10.244.2.20:8080")
		if got := onPath(t, c, both); len(got) != 2 {
			t.Errorf("%s: kube-proxy's ClusterIP entries on its path: %v, want both (the proxy cut changes none)", what, got)
		}
		if n := kubeProxySyncFailures(t, ns); n != 0 {
			t.Errorf("%s: kube-proxy counted %v failed nftables syncs", what, n)
		}
	}
	check("guarded")

	stopKP()
	startKubeProxy(t, ns, kp, kubeconfig, node)
	synced("restarted")
	check("after kube-proxy restarted")
	settle(t, g)
	if r := g.Status().ProxyCut.Resets; r != 2 {
		t.Errorf("the proxy cut counted %d resets, want 2", r)
	}
}
