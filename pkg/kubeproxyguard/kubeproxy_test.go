package kubeproxyguard

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/internal/netnstest"
	"github.com/aether-mesh/svclb/internal/testenv"
)

// TestGuardWithRealKubeProxy runs a real kube-proxy v1.34 (nftables mode,
// built by `make k8s-bins`) in a throwaway namespace against a real
// apiserver, guards one of two NodePort Services (with an external IP),
// restarts kube-proxy (its start-up full sync restores everything) and
// changes the guarded Service's endpoints: each time the guard cuts its
// ClusterIP entry again, leaves its NodePort and external-IP path as
// kube-proxy wrote it, and leaves the other Service alone.
func TestGuardWithRealKubeProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver, etcd and kube-proxy")
	}
	ns := netnstest.New(t)
	kp := testenv.Binary(t, "kube-proxy")
	cfg := testenv.Start(t, testenv.Options{})
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	kubeconfig := forwardAPIServer(t, ns, cfg)
	const node = "node-a"
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy waits (up to 30 s) for its Node to have an address.
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.10"}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
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

func setEndpoints(t *testing.T, kube kubernetes.Interface, s types.NamespacedName, ips ...string) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
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
