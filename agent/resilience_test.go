package agent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
	"github.com/aether-mesh/svclb/nodeproxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// stopTimeout: kube-apiserver's graceful shutdown can take longer than this test may wait; past
// it envtest kills the process, which is an outage all the same.
const stopTimeout = 5 * time.Second

// TestAPIServerOutage: while the apiserver is down the agent keeps serving its last snapshot
// (no removal reaches the proxy, /healthz and /status answer); once it is back, the informers
// reconnect and an EndpointSlice change is pushed on the same ADS stream.
func TestAPIServerOutage(t *testing.T) {
	env, rc := testenv.StartEnv(t, testenv.Options{Restartable: true, StopTimeout: stopTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := gomega.NewWithT(t)
	kube := kubernetes.NewForConfigOrDie(rc)
	svc := createService(ctx, t, kube, "web", 80)
	setSlice(ctx, t, kube, "web", 8080, ready("10.244.1.5"), ready("10.244.2.5"))
	name := "svc:" + svc.Spec.ClusterIP + ":80"

	sock := filepath.Join(t.TempDir(), "xds.sock")
	httpAddr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock,
		NetnsDir: t.TempDir(), Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond})
	c, _, _ := dialAgent(ctx, t, sock)
	g.Eventually(func() bool { return c.Has(resourcev3.ClusterType, name) }).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.BeTrue(), "the Service's cluster")
	// The client asks EDS for every EDS cluster it holds, as Envoy does.
	adstest.Eventually(t, "2 endpoints", func() bool { return c.Endpoints(name) == 2 })
	before := status(t, httpAddr)

	t0 := time.Now()
	if err := env.ControlPlane.APIServer.Stop(); err != nil && !testenv.Killed(err) {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver stopped in %s", time.Since(t0).Round(time.Millisecond))
	if _, err := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Fatal("the apiserver still answers after Stop: this test would prove nothing")
	}
	// Shutting down, the apiserver may withdraw its own endpoint from Service kubernetes: a real
	// change the agent rightly pushes, at a moment the test does not know. After that nothing
	// may change: /status must hold still for as long as the reflectors' watches take to break
	// and their relists to fail, with the clusters of the last snapshot.
	held := func() [3]int {
		st := status(t, httpAddr)
		return [3]int{st.Clusters, int(st.SnapshotVersion), st.Endpoints}
	}
	g.Eventually(func(g gomega.Gomega) {
		during := held()
		g.Expect(during[0]).To(gomega.Equal(before.Clusters), "clusters")
		g.Consistently(held).WithTimeout(3*time.Second).WithPolling(100*time.Millisecond).Should(gomega.Equal(during), "clusters, snapshot version, endpoints")
	}).WithTimeout(15*time.Second).Should(gomega.Succeed(), "during the outage /status keeps the last snapshot (%d clusters)", before.Clusters)
	if n := c.Endpoints(name); n != 2 || !c.Has(resourcev3.ClusterType, name) {
		t.Errorf("during the outage the client has %s: cluster %t, %d endpoints; want the cluster and 2", name, c.Has(resourcev3.ClusterType, name), n)
	}
	if code := get(t, httpAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("during the outage /healthz = %d, want 200", code)
	}
	if errs := c.StreamErrors(); len(errs) > 0 {
		t.Fatalf("ADS stream broke during the outage: %v", errs)
	}

	t0 = time.Now()
	if err := env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver back on %s in %s", rc.Host, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	setSlice(ctx, t, kube, "web", 8080, ready("10.244.1.5"), ready("10.244.2.5"), ready("10.244.3.5"))
	// client-go's reflector backs off up to 30 s between relists; the outage was short.
	g.Eventually(func() int { return c.Endpoints(name) }).WithTimeout(45*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.Equal(3), "the EndpointSlice change pushed after the restart")
	t.Logf("EndpointSlice change pushed %s after the apiserver came back", time.Since(t0).Round(time.Millisecond))
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType} {
		if r := c.Removed(typ); len(r) > 0 {
			t.Errorf("resources removed across the outage (%s): %v", typ, r)
		}
	}
	if errs := c.StreamErrors(); len(errs) > 0 {
		t.Errorf("ADS stream: %v", errs)
	}
}

// TestAgentRestart: the real built-in proxy keeps every cluster and listener (and keeps
// forwarding, when root can give it a pod netns) while the agent is gone, reconnects to the
// restarted agent on the same socket, and takes its updates; no cluster vanishes in between.
func TestAgentRestart(t *testing.T) {
	rc := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := gomega.NewWithT(t)
	kube := kubernetes.NewForConfigOrDie(rc)
	netnsDir := t.TempDir()

	// As root: a pod netns joined to the host by a veth, with the capture installed, and the
	// backend on the host end; a connection to VIP:port from the pod is diverted to the capture
	// listener by TPROXY with its destination intact.
	const port = 80
	var pod *podNet
	backend, targetPort := "10.244.9.9", 8080 // not reachable: config checks only
	if os.Geteuid() == 0 || !prereq.Unit() {
		pod = newPodNet(t)
		backend, targetPort = pod.hostIP, serveBackend(t, pod.hostIP)
		// The agent scans its netns directory; a link keeps other tests' namespaces out of it.
		if err := os.Symlink(pod.ns.Path(), filepath.Join(netnsDir, pod.ns.Name())); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("not root: checking the proxy's config only, not forwarding")
	}
	svc := createService(ctx, t, kube, "web", port)
	name := "svc:" + svc.Spec.ClusterIP + ":" + strconv.Itoa(port)
	setSlice(ctx, t, kube, "web", int32(targetPort), ready(backend))
	if pod != nil {
		createPod(ctx, t, kube, "client", pod.podIP)
	}

	sock := filepath.Join(t.TempDir(), "xds.sock")
	cfg := agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock,
		NetnsDir: netnsDir, Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond}
	_, stop1 := startAgent(ctx, t, cfg)

	px := nodeproxy.New(nodeproxy.Options{XDSSocket: sock, NodeID: contract.NodeID(node), NodeCluster: contract.NodeCluster,
		Logger: testLogger(t, "proxy")})
	pctx, pcancel := context.WithCancel(ctx)
	pdone := make(chan error, 1)
	go func() { pdone <- px.Run(pctx) }()
	defer func() { pcancel(); <-pdone }() //nolint:errcheck // Run's error after cancel is ctx's
	admin := px.AdminHandler()
	g.Eventually(func() []string { return configOf(t, admin).hosts(name) }).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.Equal([]string{backend + ":" + strconv.Itoa(targetPort)}), "the proxy has the Service's cluster")
	if pod != nil {
		g.Eventually(func() bool {
			ls := configOf(t, admin).Listeners
			return len(ls) == 1 && ls[0].GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath() == filepath.Join(netnsDir, pod.ns.Name())
		}).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "the capture listener bound in the pod netns")
		pod.expectBackend(t, svc.Spec.ClusterIP, port)
	}
	before := configOf(t, admin)

	// Watch the proxy's config continuously from here on: any gap in the cluster is a failure.
	var gapMu sync.Mutex
	var gaps []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		wait.UntilWithContext(watchCtx, func(context.Context) {
			if d := configOf(t, admin); len(d.hosts(name)) == 0 || len(d.Listeners) != len(before.Listeners) {
				gapMu.Lock()
				gaps = append(gaps, fmt.Sprintf("%s: %d hosts, %d listeners", time.Now().Format(time.StampMilli), len(d.hosts(name)), len(d.Listeners)))
				gapMu.Unlock()
			}
		}, 20*time.Millisecond)
	}()
	defer func() { stopWatch(); <-watched }() // before the test ends, also on Fatal

	stop1()
	t.Log("agent #1 stopped")
	// For a second the proxy notices the broken stream and starts reconnecting; it keeps its
	// clusters all along.
	g.Consistently(func() []string { return configOf(t, admin).names() }).WithTimeout(time.Second).WithPolling(50*time.Millisecond).
		Should(gomega.Equal(before.names()), "the proxy's clusters without an agent")
	if pod != nil {
		pod.expectBackend(t, svc.Spec.ClusterIP, port) // served from the proxy's last config
	}

	startAgent(ctx, t, cfg)
	t.Log("agent #2 started on the same socket")
	// A change only agent #2 can have pushed: a serving, terminating endpoint (a later band, so
	// forwarding still goes to the ready backend).
	setSlice(ctx, t, kube, "web", int32(targetPort), ready(backend), terminating("10.244.9.10"))
	want := []string{backend + ":" + strconv.Itoa(targetPort), "10.244.9.10:" + strconv.Itoa(targetPort)}
	g.Eventually(func() []string { return configOf(t, admin).hosts(name) }).WithTimeout(45*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.Equal(want), "agent #2's update in the proxy")
	if pod != nil {
		pod.expectBackend(t, svc.Spec.ClusterIP, port)
	}
	stopWatch()
	<-watched // closed: the deferred receive returns at once
	if got := configOf(t, admin); !slices.Equal(got.names(), before.names()) {
		t.Errorf("after agent #2 the proxy has clusters %v, want %v", got.names(), before.names())
	}
	gapMu.Lock()
	defer gapMu.Unlock()
	if len(gaps) > 0 {
		t.Errorf("the proxy lost config across the agent restart (%d samples), first: %s", len(gaps), gaps[0])
	}
}

// createPod creates a captured, running pod on node with ip.
func createPod(ctx context.Context, t *testing.T, kube kubernetes.Interface, name, ip string) {
	t.Helper()
	// No controller-manager in envtest: the ServiceAccount admission plugin needs "default".
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.CapturedLabel: "true"}},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podNet is a pod-like network namespace joined to the host by a veth pair, its TCP captured
// (internal/capture) as a meshed pod's is.
type podNet struct {
	ns            *netnstest.NS
	hostIP, podIP string
	hostIf        string
}

func newPodNet(t *testing.T) *podNet {
	t.Helper()
	prereq.Root(t, "a pod network namespace")
	prereq.Command(t, "ip")
	prereq.Command(t, "nsenter")
	ns := netnstest.New(t)
	var b [3]byte
	_, _ = rand.Read(b[:])
	// A random /30 in 10.216.0.0/16 so parallel tests (other packages too) do not collide.
	p := &podNet{ns: ns, hostIf: "svr" + hex.EncodeToString(b[:])}
	p.hostIP = fmt.Sprintf("10.216.%d.%d", b[0], b[1]&^3+1)
	p.podIP = fmt.Sprintf("10.216.%d.%d", b[0], b[1]&^3+2)
	run(t, "ip", "link", "add", p.hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns.Name())
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", p.hostIf).Run() })
	run(t, "ip", "addr", "add", p.hostIP+"/30", "dev", p.hostIf)
	run(t, "ip", "link", "set", p.hostIf, "up")
	run(t, "ip", "-n", ns.Name(), "addr", "add", p.podIP+"/30", "dev", "eth0")
	run(t, "ip", "-n", ns.Name(), "link", "set", "eth0", "up")
	run(t, "ip", "-n", ns.Name(), "route", "add", "default", "via", p.hostIP)
	cfg := capture.DefaultConfig()
	cfg.NetNSPath = ns.Path()
	if err := capture.Install(cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

// expectBackend connects from the pod to vip:port and wants the backend's greeting.
func (p *podNet) expectBackend(t *testing.T, vip string, port int) {
	t.Helper()
	var c net.Conn
	if err := p.ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(vip, strconv.Itoa(port)), 3*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %s:%d from the pod: %v", vip, port, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	if got := strings.TrimSpace(string(b)); got != "backend" {
		t.Fatalf("via %s:%d got %q, want the backend's greeting", vip, port, got)
	}
}

// serveBackend greets every connection on ip (host netns) and returns its port.
func serveBackend(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp4", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("backend\n"))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// proxyConfig is what these tests read of the built-in proxy's
// /config_dump?include_eds, which has Envoy's shape (envoy.admin.v3.ConfigDump).
type proxyConfig struct {
	Listeners []*listenerv3.Listener // active
	clusters  []string               // active and warming, sorted
	warm      map[string]bool
	loads     map[string]*endpointv3.ClusterLoadAssignment
}

func configOf(t *testing.T, admin http.Handler) proxyConfig {
	t.Helper()
	rec := httptest.NewRecorder()
	admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/config_dump?include_eds", nil))
	d := proxyConfig{warm: map[string]bool{}, loads: map[string]*endpointv3.ClusterLoadAssignment{}}
	var dump adminv3.ConfigDump
	if err := protojson.Unmarshal(rec.Body.Bytes(), &dump); err != nil {
		t.Errorf("config_dump: %v", err)
		return d
	}
	for _, a := range dump.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("config_dump: %v", err)
			continue
		}
		switch m := m.(type) {
		case *adminv3.ClustersConfigDump:
			for i, dcs := range [][]*adminv3.ClustersConfigDump_DynamicCluster{m.GetDynamicActiveClusters(), m.GetDynamicWarmingClusters()} {
				for _, dc := range dcs {
					var c clusterv3.Cluster
					if err := dc.GetCluster().UnmarshalTo(&c); err != nil {
						t.Errorf("config_dump cluster: %v", err)
					}
					d.clusters = append(d.clusters, c.GetName())
					d.warm[c.GetName()] = i == 0
				}
			}
		case *adminv3.ListenersConfigDump:
			for _, dl := range m.GetDynamicListeners() {
				var l listenerv3.Listener
				if st := dl.GetActiveState(); st != nil {
					if err := st.GetListener().UnmarshalTo(&l); err != nil {
						t.Errorf("config_dump listener: %v", err)
					}
					d.Listeners = append(d.Listeners, &l)
				}
			}
		case *adminv3.EndpointsConfigDump:
			for _, e := range m.GetDynamicEndpointConfigs() {
				var cla endpointv3.ClusterLoadAssignment
				if err := e.GetEndpointConfig().UnmarshalTo(&cla); err != nil {
					t.Errorf("config_dump endpoints: %v", err)
				}
				d.loads[cla.GetClusterName()] = &cla
			}
		}
	}
	slices.Sort(d.clusters)
	return d
}

func (d proxyConfig) names() []string { return d.clusters }

// hosts lists a warm cluster's hosts, priority by priority (its EDS name is
// its own name, as the agent publishes them).
func (d proxyConfig) hosts(name string) []string {
	if !d.warm[name] {
		return nil
	}
	var out []string
	for _, lle := range d.loads[name].GetEndpoints() {
		for _, e := range lle.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, sa.GetAddress()+":"+strconv.Itoa(int(sa.GetPortValue())))
		}
	}
	return out
}
