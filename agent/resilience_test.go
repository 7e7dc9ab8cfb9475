package agent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/netnstest"
	"github.com/aether-mesh/svclb/internal/testenv"
	"github.com/aether-mesh/svclb/nodeproxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const node = "node-a"

// TestAPIServerOutage: while the apiserver is down the agent keeps serving its last snapshot
// (no removal reaches the proxy, /healthz and /status answer); once it is back, the informers
// reconnect and an EndpointSlice change is pushed on the same ADS stream.
func TestAPIServerOutage(t *testing.T) {
	env, rc := testenv.StartEnv(t, testenv.Options{Restartable: true, StopTimeout: stopTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(rc)
	svc := createService(ctx, t, kube, "web", 80)
	setSlice(ctx, t, kube, "web", 8080, ready("10.244.1.5"), ready("10.244.2.5"))
	name := "svc:" + svc.Spec.ClusterIP + ":80"

	httpAddr := freeAddr(t)
	sock := filepath.Join(t.TempDir(), "xds.sock")
	startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock, HTTPAddr: httpAddr,
		NetnsDir: t.TempDir(), Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond})
	c := dialADS(ctx, t, sock)
	c.send(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	waitUntil(t, 30*time.Second, "the Service's cluster", func() bool { return c.has(resourcev3.ClusterType, name) })
	c.send(t, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{name}})
	waitUntil(t, 10*time.Second, "2 endpoints", func() bool { return c.endpoints(name) == 2 })
	before := status(t, httpAddr)

	t0 := time.Now()
	if err := env.ControlPlane.APIServer.Stop(); err != nil && !testenv.Killed(err) {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver stopped in %s", time.Since(t0).Round(time.Millisecond))
	if _, err := kube.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Fatal("the apiserver still answers after Stop: this test would prove nothing")
	}
	// Shutting down, the apiserver withdraws its own endpoint from Service kubernetes: a real
	// change the agent rightly pushes. After that nothing may change: wait long enough for the
	// reflectors' watches to break and their relists to fail, then compare.
	time.Sleep(time.Second)
	during := status(t, httpAddr)
	time.Sleep(3 * time.Second)
	if got := status(t, httpAddr); got.Clusters != before.Clusters || got.SnapshotVersion != during.SnapshotVersion || got.Endpoints != during.Endpoints {
		t.Errorf("during the outage /status went from %+v to %+v, want the last snapshot kept (%d clusters)", during, got, before.Clusters)
	}
	if n := c.endpoints(name); n != 2 || !c.has(resourcev3.ClusterType, name) {
		t.Errorf("during the outage the client has %s: cluster %t, %d endpoints; want the cluster and 2", name, c.has(resourcev3.ClusterType, name), n)
	}
	if code := get(t, httpAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("during the outage /healthz = %d, want 200", code)
	}
	if err := c.failure(); err != nil {
		t.Fatalf("ADS stream broke during the outage: %v", err)
	}

	t0 = time.Now()
	if err := env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver back on %s in %s", rc.Host, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	setSlice(ctx, t, kube, "web", 8080, ready("10.244.1.5"), ready("10.244.2.5"), ready("10.244.3.5"))
	// client-go's reflector backs off up to 30 s between relists; the outage was short.
	waitUntil(t, 45*time.Second, "the EndpointSlice change pushed after the restart", func() bool { return c.endpoints(name) == 3 })
	t.Logf("EndpointSlice change pushed %s after the apiserver came back", time.Since(t0).Round(time.Millisecond))
	if r := c.removed(); len(r) > 0 {
		t.Errorf("resources removed across the outage: %v", r)
	}
	if err := c.failure(); err != nil {
		t.Errorf("ADS stream: %v", err)
	}
}

// TestAgentRestart: the real built-in proxy keeps every cluster and listener (and keeps
// forwarding, when root can give it a pod netns) while the agent is gone, reconnects to the
// restarted agent on the same socket, and takes its updates; no cluster vanishes in between.
func TestAgentRestart(t *testing.T) {
	rc := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(rc)
	netnsDir := t.TempDir()

	// As root: a pod netns joined to the host by a veth, the Service's VIP on its loopback, and
	// the backend on the host end; a connection to VIP:port from the pod lands on the capture
	// listener (bound in the pod netns on that port) with its destination intact, as TPROXY
	// would deliver it, without needing the capture ruleset.
	const port = 18001 // the capture port: the listener is bound on it
	var pod *podNet
	backend, targetPort := "10.244.9.9", 8080 // not reachable: config checks only
	if os.Geteuid() == 0 {
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
		pod.addVIP(t, svc.Spec.ClusterIP)
		createPod(ctx, t, kube, "client", pod.podIP)
	}

	sock := filepath.Join(t.TempDir(), "xds.sock")
	cfg := agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock, HTTPAddr: "127.0.0.1:0",
		NetnsDir: netnsDir, Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond}
	stop1 := startAgent(ctx, t, cfg)

	px := nodeproxy.New(nodeproxy.Options{XDSSocket: sock, NodeID: "svclb-node~" + node, NodeCluster: "svclb",
		Logger: testLogger(t, "proxy")})
	pctx, pcancel := context.WithCancel(ctx)
	pdone := make(chan error, 1)
	go func() { pdone <- px.Run(pctx) }()
	defer func() { pcancel(); <-pdone }()
	admin := px.AdminHandler()
	waitUntil(t, 30*time.Second, "the proxy has the Service's cluster", func() bool {
		return slices.Equal(configOf(t, admin).hosts(name), []string{backend + ":" + strconv.Itoa(targetPort)})
	})
	if pod != nil {
		waitUntil(t, 30*time.Second, "the capture listener bound in the pod netns", func() bool {
			ls := px.ListenerStatuses()
			return len(ls) == 1 && ls[0].Bound && ls[0].Netns == filepath.Join(netnsDir, pod.ns.Name())
		})
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
		for watchCtx.Err() == nil {
			if d := configOf(t, admin); len(d.hosts(name)) == 0 || len(d.Listeners) != len(before.Listeners) {
				gapMu.Lock()
				gaps = append(gaps, fmt.Sprintf("%s: %d hosts, %d listeners", time.Now().Format(time.StampMilli), len(d.hosts(name)), len(d.Listeners)))
				gapMu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stopWatch(); <-watched }() // before the test ends, also on Fatal

	stop1()
	t.Log("agent #1 stopped")
	time.Sleep(time.Second) // the proxy notices the broken stream and starts reconnecting
	if pod != nil {
		pod.expectBackend(t, svc.Spec.ClusterIP, port) // served from the proxy's last config
	}
	if got := configOf(t, admin); !slices.Equal(got.names(), before.names()) {
		t.Fatalf("without an agent the proxy has clusters %v, want %v", got.names(), before.names())
	}

	startAgent(ctx, t, cfg)
	t.Log("agent #2 started on the same socket")
	// A change only agent #2 can have pushed: a serving, terminating endpoint (a later band, so
	// forwarding still goes to the ready backend).
	setSlice(ctx, t, kube, "web", int32(targetPort), ready(backend), terminating("10.244.9.10"))
	want := []string{backend + ":" + strconv.Itoa(targetPort), "10.244.9.10:" + strconv.Itoa(targetPort)}
	waitUntil(t, 45*time.Second, "agent #2's update in the proxy", func() bool { return slices.Equal(configOf(t, admin).hosts(name), want) })
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

// stopTimeout: kube-apiserver's graceful shutdown can take longer than this test may wait; past
// it envtest kills the process, which is an outage all the same.
const stopTimeout = 5 * time.Second

// startAgent runs agent.Run until the returned stop (also called at cleanup) and waits for its
// xDS socket (opened only after the first snapshot).
func startAgent(ctx context.Context, t *testing.T, cfg agent.Config) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t, "agent")
	}
	// Agent #2 must not find agent #1's socket and report ready before it opened its own.
	_ = os.Remove(cfg.XDSSocket)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	for {
		if _, err := os.Stat(cfg.XDSSocket); err == nil {
			return stop
		}
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("the agent never opened its xDS socket")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func createService(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string, port int) *corev1.Service {
	t.Helper()
	svc, err := kube.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: int32(port), Protocol: corev1.ProtocolTCP}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func ready(ip string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}
}

func terminating(ip string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}}
}

// setSlice creates or replaces Service name's only EndpointSlice.
func setSlice(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string, port int32, eps ...discoveryv1.Endpoint) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
	api := kube.DiscoveryV1().EndpointSlices("default")
	old, err := api.Get(ctx, es.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, es, metav1.CreateOptions{})
	case err == nil:
		es.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx, es, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("endpointslice %s: %v", es.Name, err)
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

// podNet is a pod-like network namespace joined to the host by a veth pair.
type podNet struct {
	ns            *netnstest.NS
	hostIP, podIP string
	hostIf        string
}

func newPodNet(t *testing.T) *podNet {
	t.Helper()
	for _, bin := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
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
	return p
}

func (p *podNet) addVIP(t *testing.T, vip string) {
	run(t, "ip", "-n", p.ns.Name(), "addr", "add", vip+"/32", "dev", "lo")
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

// proxyConfig is the part of the built-in proxy's /config_dump these tests read.
type proxyConfig struct {
	Listeners []nodeproxy.ListenerStatus
	Clusters  []struct {
		Name       string
		Warming    bool
		Priorities [][]string
	}
}

func configOf(t *testing.T, admin http.Handler) proxyConfig {
	t.Helper()
	rec := httptest.NewRecorder()
	admin.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/config_dump", nil))
	var d proxyConfig
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		t.Errorf("config_dump: %v", err)
	}
	return d
}

func (d proxyConfig) names() []string {
	var out []string
	for _, c := range d.Clusters {
		out = append(out, c.Name)
	}
	return out
}

// hosts lists a warm cluster's hosts, priority by priority.
func (d proxyConfig) hosts(name string) []string {
	for _, c := range d.Clusters {
		if c.Name == name && !c.Warming {
			var out []string
			for _, p := range c.Priorities {
				out = append(out, p...)
			}
			return out
		}
	}
	return nil
}

// adsClient is a bare delta ADS client that records what it is sent and ACKs everything.
type adsClient struct {
	st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient

	mu      sync.Mutex
	have    map[string]map[string]int // type → name → endpoint count (0 for clusters)
	removes []string
	err     error
}

func dialADS(ctx context.Context, t *testing.T, sock string) *adsClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &adsClient{st: st, have: map[string]map[string]int{}}
	go c.recv()
	return c
}

func (c *adsClient) recv() {
	for {
		r, err := c.st.Recv()
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.mu.Unlock()
			return
		}
		m := c.have[r.TypeUrl]
		if m == nil {
			m = map[string]int{}
			c.have[r.TypeUrl] = m
		}
		for _, x := range r.Resources {
			m[x.Name] = 0
			cla := &endpointv3.ClusterLoadAssignment{}
			if r.TypeUrl == resourcev3.EndpointType && x.Resource.UnmarshalTo(cla) == nil {
				for _, l := range cla.Endpoints {
					m[x.Name] += len(l.LbEndpoints)
				}
			}
		}
		for _, n := range r.RemovedResources {
			delete(m, n)
			c.removes = append(c.removes, n)
		}
		c.mu.Unlock()
		if err := c.st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}); err != nil {
			return // Recv reports it
		}
	}
}

func (c *adsClient) send(t *testing.T, r *discoveryv3.DeltaDiscoveryRequest) {
	t.Helper()
	if err := c.st.Send(r); err != nil {
		t.Fatal(err)
	}
}

func (c *adsClient) has(typ, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.have[typ][name]
	return ok
}

func (c *adsClient) endpoints(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.have[resourcev3.EndpointType][name]
}

func (c *adsClient) removed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.removes)
}

func (c *adsClient) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func status(t *testing.T, addr string) agent.Status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatalf("/status: %v", err)
	}
	defer resp.Body.Close()
	var s agent.Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return s
}

func get(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// freeAddr returns a loopback address free a moment ago: agent.Config takes an address, not a
// listener, and these tests must read /status.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitUntil(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testLogger collects warnings and errors and shows them if the test failed (goroutines may
// still log after the test body returned, where t.Log would panic).
func testLogger(t *testing.T, who string) *slog.Logger {
	var mu sync.Mutex
	var b strings.Builder
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() && b.Len() > 0 {
			t.Logf("%s log:\n%s", who, b.String())
		}
	})
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return b.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
