package kubeproxyguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
)

// TestGuardWithRealKubeProxy runs a real kube-proxy v1.34 (nftables mode,
// built by `make k8s-bins`) in a throwaway namespace against a real
// apiserver, guards one of two NodePort Services (with an external IP),
// restarts kube-proxy (its start-up full sync restores everything) and
// changes the guarded Service's endpoints: each time the guard cuts its
// ClusterIP entry again, leaves its NodePort and external-IP path as
// kube-proxy wrote it, and leaves the other Service alone.
func TestGuardWithRealKubeProxy(t *testing.T) {
	const node = "node-a"
	ns, kp, kube, kubeconfig := realKubeProxy(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	demo, keep := svc("default/demo"), svc("default/keep")
	var demoNodePort int32
	for _, s := range []types.NamespacedName{demo, keep} {
		lbls := map[string]string{}
		var externalIPs []string
		if s == demo {
			lbls[Label] = LabelValue
			externalIPs = []string{"203.0.113.50"}
		}
		created, err := kube.CoreV1().Services(s.Namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: lbls},
			Spec: corev1.ServiceSpec{
				Type:            corev1.ServiceTypeNodePort,
				Ports:           []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
				SessionAffinity: corev1.ServiceAffinityClientIP,
				ExternalIPs:     externalIPs,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s == demo {
			demoNodePort = created.Spec.Ports[0].NodePort
		}
		setEndpoints(t, kube, s, "10.244.1.10", "10.244.2.20")
	}

	t0 := time.Now()
	stage := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	stopKP := startKubeProxy(t, ns, kp, kubeconfig, node)
	c := conn(t, ns)
	both := []types.NamespacedName{demo, keep}
	if _, ok := waitFor(60*time.Second, func() bool { return len(onPath(t, c, both)) == 2 }); !ok {
		t.Fatalf("kube-proxy did not program both Services: %v", onPath(t, c, both))
	}

	stage("kube-proxy programmed both Services")
	g := startGuard(t, ns, 5*time.Second)
	watched := make(chan error, 1)
	go func() { watched <- WatchServices(ctx, kube, g) }()
	defer func() { cancel(); <-watched }() //nolint:errcheck // the watch ends with ctx's error
	expect := func(what string) {
		t.Helper()
		if _, ok := waitFor(10*time.Second, func() bool {
			p := onPath(t, c, both)
			return len(p) == 1 && p[0] == keep
		}); !ok {
			t.Fatalf("%s: on kube-proxy's path: %v, want only %v", what, onPath(t, c, both), keep)
		}
	}
	redeletions := func() int {
		for _, s := range g.Status().Services {
			return s.Redeletions
		}
		return -1
	}
	// What of demo stays: kube-proxy's NodePort and external-IP elements,
	// its chains and affinity sets (the NodePort path goes through them).
	externalPath := []*regexp.Regexp{
		regexp.MustCompile(`203\.0\.113\.50 \. tcp \. 80 : goto external-[A-Z2-7]{8}-default/demo/tcp/http`),
		regexp.MustCompile(fmt.Sprintf(`tcp \. %d : goto external-[A-Z2-7]{8}-default/demo/tcp/http`, demoNodePort)),
		regexp.MustCompile(`chain service-[A-Z2-7]{8}-default/demo/tcp/http \{`),
		regexp.MustCompile(`chain external-[A-Z2-7]{8}-default/demo/tcp/http \{`),
		regexp.MustCompile(`set affinity-[A-Z2-7]{8}-default/demo/tcp/http__`),
	}
	expectExternalPath := func(what string) {
		t.Helper()
		table := listTable(t, ns)
		for _, re := range externalPath {
			if !re.MatchString(table) {
				t.Errorf("%s: demo's NodePort path lacks %s:\n%s", what, re, table)
			}
		}
	}
	expect("guarded")
	expectExternalPath("guarded")

	stage("guarded")
	// Restart: the start-up full sync restores demo.
	stopKP()
	stage("kube-proxy stopped")
	before := redeletions()
	startKubeProxy(t, ns, kp, kubeconfig, node)
	if _, ok := waitFor(60*time.Second, func() bool { return redeletions() > before }); !ok {
		t.Fatal("kube-proxy's restart restored nothing the guard saw")
	}
	expect("after kube-proxy restarted")
	expectExternalPath("after kube-proxy restarted")
	stage("restored by kube-proxy's restart, and re-deleted")

	// An endpoint change: kube-proxy's partial sync rewrites demo.
	before = redeletions()
	setEndpoints(t, kube, demo, "10.244.1.11")
	// kube-proxy syncs within its minSyncPeriod (1 s); 10 s is ample.
	if _, ok := waitFor(10*time.Second, func() bool { return redeletions() > before }); !ok {
		t.Logf("an endpoint change did not make kube-proxy restore demo (no full sync) — fine, nothing to re-delete")
	}
	expect("after an endpoint change")
	expectExternalPath("after an endpoint change")
	stage("endpoint change handled")
	for _, s := range g.Status().Services {
		t.Logf("%s/%s: %d re-deletions, last latency %.2f ms, %d errors", s.Namespace, s.Name, s.Redeletions, s.LastRedeletionLatencySeconds*1000, s.Errors)
	}
}

// TestGuardKubeProxySyncsWithoutFailures: kube-proxy deletes or moves the
// guarded Service's cut element (its endpoints go to 0 and back, then the
// Service is deleted) while an unguarded Service changes. Each of kube-proxy's
// transactions must succeed (its sync failures counter stays 0: with the
// element deleted instead of overwritten, its delete of the key fails the
// whole transaction and it retries up to 30 s later), the guarded Service
// stays cut, and the unguarded change is programmed promptly.
func TestGuardKubeProxySyncsWithoutFailures(t *testing.T) {
	const node = "node-a"
	ns, kp, kube, kubeconfig := realKubeProxy(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	demo, keep := svc("default/demo"), svc("default/keep")
	for _, s := range []types.NamespacedName{demo, keep} {
		lbls := map[string]string{}
		if s == demo {
			lbls[Label] = LabelValue
		}
		if _, err := kube.CoreV1().Services(s.Namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: lbls},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setEndpoints(t, kube, demo, "10.244.1.10")
	setEndpoints(t, kube, keep, "10.244.3.30")

	startKubeProxy(t, ns, kp, kubeconfig, node)
	c := conn(t, ns)
	both := []types.NamespacedName{demo, keep}
	if _, ok := waitFor(60*time.Second, func() bool { return len(onPath(t, c, both)) == 2 }); !ok {
		t.Fatalf("kube-proxy did not program both Services: %v", onPath(t, c, both))
	}
	g := startGuard(t, ns, 5*time.Second)
	watched := make(chan error, 1)
	go func() { watched <- WatchServices(ctx, kube, g) }()
	defer func() { cancel(); <-watched }() //nolint:errcheck // the watch ends with ctx's error
	onlyKeep := func(what string) {
		t.Helper()
		if _, ok := waitFor(10*time.Second, func() bool { return slices.Equal(onPath(t, c, both), []types.NamespacedName{keep}) }); !ok {
			t.Fatalf("%s: on kube-proxy's path: %v, want only %v", what, onPath(t, c, both), keep)
		}
	}
	onlyKeep("guarded")
	failures := func(what string) {
		t.Helper()
		if n := kubeProxySyncFailures(t, ns); n != 0 {
			t.Errorf("%s: kube-proxy counted %v failed nftables syncs", what, n)
		}
	}
	failures("guarded")

	// Each step makes kube-proxy delete the cut key (as it is in its own
	// record), then changes keep: kube-proxy must program it within a
	// couple of sync periods (minSyncPeriod 1 s), not after a failed
	// transaction's 30 s retry.
	for i, step := range []struct {
		what string
		do   func()
	}{
		{"demo's endpoints gone (service-ips -> no-endpoint-services)", func() { setEndpoints(t, kube, demo) }},
		{"demo's endpoints back (no-endpoint-services -> service-ips)", func() { setEndpoints(t, kube, demo, "10.244.1.11") }},
		{"demo deleted", func() {
			if err := kube.CoreV1().Services(demo.Namespace).Delete(ctx, demo.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		step.do()
		ip := fmt.Sprintf("10.244.3.%d", 31+i)
		setEndpoints(t, kube, keep, ip)
		took, ok := waitFor(5*time.Second, func() bool { return strings.Contains(listTable(t, ns), "dnat to "+ip+":8080") })
		if !ok {
			t.Fatalf("%s: keep's new endpoint %s not programmed after %v", step.what, ip, took)
		}
		t.Logf("%s: keep's change programmed in %v", step.what, took.Round(time.Millisecond))
		onlyKeep(step.what)
		failures(step.what)
	}
	// kube-proxy removed demo's key itself: no ClusterIP entry of it is
	// left, cut or not (its emptied chains go later, kube-proxy's way).
	tb, err := readTable(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := tb.services[demo]; o != nil {
		t.Errorf("demo deleted, but the table still holds %v, cut %v", o.names(), o.cutNames())
	}
}

// TestGuardCutsOnlyMeshedPortsWithRealKubeProxy: a chosen Service with TCP,
// UDP, SCTP and DNS ports (two without endpoints), as a real kube-proxy v1.34
// programs it, every ClusterIP entry cut as a guard that cut every protocol
// left it. The guard cuts only its TCP ports other than 53, the ones the
// meshed path takes over (contract.MeshServes), and puts the others back
// exactly as kube-proxy wrote them, without failing any of kube-proxy's
// syncs; /status says which ports are cut and why the others stay.
// kube-proxy's restart (a full sync: it writes back the two cut ones)
// changes none of it.
func TestGuardCutsOnlyMeshedPortsWithRealKubeProxy(t *testing.T) {
	const node = "node-a"
	ns, kp, kube, kubeconfig := realKubeProxy(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	multi := svc("default/multi")
	created, err := kube.CoreV1().Services(multi.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: multi.Namespace, Name: multi.Name, Labels: map[string]string{Label: LabelValue}},
		Spec:       corev1.ServiceSpec{Ports: multiPorts},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := created.Spec.ClusterIP
	// metrics and syslog have no endpoint: no-endpoint-services elements.
	setEndpointPorts(t, kube, multi, []discoveryv1.EndpointPort{
		{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)},
		{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)},
		{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolTCP)},
		{Name: ptr.To("assoc"), Port: ptr.To[int32](9999), Protocol: ptr.To(corev1.ProtocolSCTP)},
	}, "10.244.1.40")

	stopKP := startKubeProxy(t, ns, kp, kubeconfig, node)
	programmed := func() []string {
		out, err := ns.Command("nft", "list", "table", "ip", TableName).Output()
		if err != nil {
			return nil // kube-proxy has not written it yet
		}
		return clusterIPElements(canonical(string(out)), ip)
	}
	if _, ok := waitFor(60*time.Second, func() bool { return len(programmed()) == len(multiPorts) }); !ok {
		t.Fatalf("kube-proxy did not program the %d ports of %s: %v", len(multiPorts), multi, programmed())
	}
	// Its sync recorded: the failure count below is then there to read.
	if _, ok := waitFor(30*time.Second, func() bool {
		mfs, err := kubeProxyMetrics(ns)
		return err == nil && mfs[kubeProxySyncDuration] != nil
	}); !ok {
		t.Fatalf("kube-proxy's /metrics has no %s", kubeProxySyncDuration)
	}
	before := listTable(t, ns)
	t.Logf("kube-proxy's ClusterIP entries of %s:\n%s", multi, strings.Join(clusterIPElements(before, ip), "\n"))
	loadScript(t, ns, cutEveryPort(before, ip))
	want := withCut(before, ip+" . tcp . 80", ip+" . tcp . 9153")

	// Chosen from the first pass, as by a watch already synced: the put
	// back is the chosen Service's, not that of a Service not chosen.
	g := startGuard(t, ns, 5*time.Second, multi)
	watched := make(chan error, 1)
	go func() { watched <- WatchServices(ctx, kube, g) }()
	defer func() { cancel(); <-watched }() //nolint:errcheck // the watch ends with ctx's error
	expect := func(what string) {
		t.Helper()
		var got []string
		if _, ok := waitFor(10*time.Second, func() bool {
			got = clusterIPElements(listTable(t, ns), ip)
			return slices.Equal(got, clusterIPElements(want, ip))
		}); !ok {
			t.Fatalf("%s: ClusterIP entries of %s\n%s\nwant only tcp/80 and tcp/9153 cut:\n%s", what, multi,
				strings.Join(got, "\n"), strings.Join(clusterIPElements(want, ip), "\n"))
		}
	}
	expect("guarded")
	if n := kubeProxySyncFailures(t, ns); n != 0 {
		t.Errorf("guarded: kube-proxy counted %v failed nftables syncs", n)
	}
	if got := listTable(t, ns); got != want {
		t.Errorf("guarding changed more than the cut ports:\n%s", lineDiff(want, got))
	}
	expectPorts(t, g, multi, multiCut, multiKept)

	stopKP()
	redel := 0
	for _, s := range g.Status().Services {
		redel = s.Redeletions
	}
	startKubeProxy(t, ns, kp, kubeconfig, node)
	if _, ok := waitFor(60*time.Second, func() bool {
		for _, s := range g.Status().Services {
			return s.Redeletions > redel
		}
		return false
	}); !ok {
		t.Fatal("kube-proxy's restart restored nothing the guard saw")
	}
	expect("after kube-proxy restarted")
	expectPorts(t, g, multi, multiCut, multiKept)
}

// multiPorts are default/multi's ports in the tests of what the guard cuts
// (testdata/kube-proxy-v1.34-ports.nft is what kube-proxy v1.34.4 wrote for
// them); multiCut and multiKept are what the guard's status says of them.
var (
	multiPorts = []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
		{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(5353)},
		{Name: "assoc", Port: 9999, Protocol: corev1.ProtocolSCTP},
		{Name: "syslog", Port: 514, Protocol: corev1.ProtocolUDP},
	}
	multiCut  = []string{"tcp/80", "tcp/9153"}
	multiKept = []statusPort{
		{Port: "sctp/9999", Reason: "sctp: not served by the agent"},
		{Port: "tcp/53", Reason: "tcp/53: DNS passes through the capture"},
		{Port: "udp/53", Reason: "udp: not served by the agent"},
		{Port: "udp/514", Reason: "udp: not served by the agent"},
	}
)

// realKubeProxy is what a test of the guard against a real kube-proxy
// needs: a throwaway netns that reaches a real apiserver (envtest), the
// kube-proxy binary (`make k8s-bins`), a client, the kubeconfig kube-proxy
// reads in the netns, and its Node (node).
func realKubeProxy(t *testing.T, node string) (ns *netnstest.NS, bin string, kube kubernetes.Interface, kubeconfig string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiserver, etcd and kube-proxy")
	}
	ns = netnstest.New(t)
	bin = testenv.Binary(t, "kube-proxy")
	cfg := testenv.Start(t, testenv.Options{})
	kube = kubernetes.NewForConfigOrDie(cfg)
	kubeconfig = forwardAPIServer(t, ns, cfg)
	createNode(t, kube, node)
	return ns, bin, kube, kubeconfig
}

// createNode creates the Node kube-proxy runs as, with the address it
// waits (up to 30 s) for.
func createNode(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.10"}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeProxySyncFailures reads kube-proxy's count of failed nftables
// transactions from its /metrics (127.0.0.1:10249 inside ns).
func kubeProxySyncFailures(t *testing.T, ns *netnstest.NS) float64 {
	t.Helper()
	mfs, err := kubeProxyMetrics(ns)
	if err != nil {
		t.Fatal(err)
	}
	// A series per ip_family, absent until its first failure.
	const name = "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"
	if _, ok := mfs[kubeProxySyncDuration]; !ok {
		t.Fatalf("kube-proxy metrics lack %s: not kube-proxy's /metrics?", kubeProxySyncDuration)
	}
	var n float64
	for _, m := range mfs[name].GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// kubeProxySyncDuration is in kube-proxy's /metrics once a sync has been
// recorded.
const kubeProxySyncDuration = "kubeproxy_sync_proxy_rules_duration_seconds"

// kubeProxyMetrics reads kube-proxy's /metrics (127.0.0.1:10249 inside ns).
func kubeProxyMetrics(ns *netnstest.NS) (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			// The socket is made on a thread inside ns: it stays there.
			derr := ns.Do(func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return nil
			})
			return conn, errors.Join(derr, err)
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return nil, fmt.Errorf("kube-proxy metrics: %w", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy metrics: %w", err)
	}
	return mfs, nil
}

func setEndpoints(t *testing.T, kube kubernetes.Interface, s types.NamespacedName, ips ...string) {
	t.Helper()
	setEndpointPorts(t, kube, s, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}, ips...)
}

// setEndpointPorts writes s's EndpointSlice: ips, each serving ports.
func setEndpointPorts(t *testing.T, kube kubernetes.Interface, s types.NamespacedName, ports []discoveryv1.EndpointPort, ips ...string) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	eps := kube.DiscoveryV1().EndpointSlices(s.Namespace)
	if old, err := eps.Get(ctx, es.Name, metav1.GetOptions{}); err == nil {
		es.ResourceVersion = old.ResourceVersion
		_, err = eps.Update(ctx, es, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := eps.Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// forwardAPIServer makes the host's apiserver reachable from inside ns at
// the same address (127.0.0.1:port, so its serving certificate still
// matches): a listener opened inside ns, connections dialled from the host.
// It returns a kubeconfig file for that address.
func forwardAPIServer(t *testing.T, ns *netnstest.NS, cfg *rest.Config) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatalf("apiserver address %q: %v", cfg.Host, err)
	}
	var l net.Listener
	if err := ns.Do(func() (err error) {
		l, err = net.Listen("tcp", u.Host)
		return err
	}); err != nil {
		t.Fatalf("listen in ns: %v", err)
	}
	t.Cleanup(testenv.Forward(l, u.Host))
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// startKubeProxy runs kube-proxy in ns and returns a func that stops it
// (also called at cleanup). Its output is shown when the test fails.
func startKubeProxy(t *testing.T, ns *netnstest.NS, bin, kubeconfig, node string) func() {
	t.Helper()
	cmd := ns.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--proxy-mode=nftables",
		"--hostname-override="+node,
		"--cluster-cidr=10.244.0.0/16",
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(10256),
		"--metrics-bind-address=127.0.0.1:10249",
		// Leave the (host-wide) conntrack sysctls alone.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--v=2",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-proxy: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("kube-proxy output:\n%s", out.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
