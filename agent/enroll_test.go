package agent_test

import (
	"context"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/enroll/enrolltest"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func enrollPod(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if mutate != nil {
		mutate(p)
	}
	p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func createNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller-manager in envtest: the ServiceAccount admission plugin needs "default".
	if _, err := c.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEnrollmentThroughTheCNISocket runs the agent against a real kube-apiserver and speaks
// to it as the CNI plugin does: the decision follows the namespace selector, the opt-out
// label and hostNetwork; an enrolled pod's listener carries the netns path the plugin gave
// (the agent's netns directory is empty, so no search could have found it), and the add
// returns only once a socket listens there; DEL withdraws it; a running enrolled pod the
// plugin never saw is reported; the ConfigMap's selector is followed.
func TestEnrollmentThroughTheCNISocket(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	g := gomega.NewWithT(t)
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}, {Type: corev1.NodeInternalIP, Address: "fc00::3"},
		{Type: corev1.NodeExternalIP, Address: "192.168.9.1"}, {Type: corev1.NodeHostName, Address: node}}
	must(c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}))
	createNamespace(ctx, t, c, "mesh", map[string]string{contract.MeshLabel: contract.MeshEnabled, "team": "a"})
	createNamespace(ctx, t, c, "plain", nil)
	web := enrollPod(ctx, t, c, "mesh", "web", nil)
	enrollPod(ctx, t, c, "mesh", "optout", func(p *corev1.Pod) { p.Labels = map[string]string{contract.MeshLabel: contract.MeshDisabled} })
	enrollPod(ctx, t, c, "mesh", "hostnet", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	enrollPod(ctx, t, c, "plain", "web", nil)
	old := enrollPod(ctx, t, c, "mesh", "old", nil)
	old.Status.Phase = corev1.PodRunning
	must(c.CoreV1().Pods("mesh").UpdateStatus(ctx, old, metav1.UpdateOptions{}))

	dir := t.TempDir()
	sock := filepath.Join(dir, "xds.sock")
	cni := enroll.Client{Socket: filepath.Join(dir, "cni", "enroll.sock"), Timeout: 20 * time.Second}
	stateFile := filepath.Join(dir, "state", "enrolled.json")
	cfg := agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock, NetnsDir: t.TempDir(), Phase1: true, Phase2: true,
		Debounce: 10 * time.Millisecond, EnrollSocket: cni.Socket, EnrollFile: stateFile}
	addr, stop := startAgent(ctx, t, cfg)
	rec, _, _ := dialAgent(ctx, t, sock)

	for _, p := range []enroll.Pod{
		{Namespace: "plain", Name: "web", Netns: "/nonexistent"},
		{Namespace: "mesh", Name: "optout", Netns: "/nonexistent"},
		{Namespace: "mesh", Name: "hostnet", Netns: "/nonexistent"},
	} {
		ran := false
		enrolled, err := cni.Add(ctx, p, func([]netip.Addr) error { ran = true; return nil })
		if err != nil || enrolled || ran {
			t.Errorf("add %s: enrolled=%v install ran=%v err=%v; want not enrolled", p, enrolled, ran, err)
		}
	}
	g.Eventually(func() []string { return status(t, addr).Enrollment.Uncaptured }).WithTimeout(10*time.Second).
		Should(gomega.Equal([]string{"mesh/old"}), "a running enrolled pod the plugin never saw is reported")
	g.Expect(gaugeOf(t, addr, contract.MetricEnrolledUncaptured)).To(gomega.Equal(1.0))

	// A netns path naming the node's own namespace (the agent's) is refused before anything is
	// recorded: the proxy would bind a transparent capture port on the node.
	if e, err := cni.Add(ctx, enroll.Pod{Namespace: "mesh", Name: "web", UID: string(web.UID), ContainerID: "c1", Netns: "/proc/self/ns/net"}, nil); err == nil ||
		!strings.Contains(err.Error(), "own network namespace") {
		t.Fatalf("add with the node's netns: enrolled=%v err=%v, want refused", e, err)
	}
	g.Expect(status(t, addr).Enrollment.Enrolled).To(gomega.BeEmpty(), "a refused add was recorded")

	ns := netnstest.New(t)
	pod := enroll.Pod{Namespace: "mesh", Name: "web", UID: string(web.UID), ContainerID: "c1", Netns: ns.Path(), IP: "10.244.0.5"}
	type result struct {
		enrolled bool
		err      error
	}
	done := make(chan result, 1)
	var nodeAddrs []string // what the plugin's capture leaves alone
	go func() {
		e, err := cni.Add(ctx, pod, func(addrs []netip.Addr) error {
			for _, a := range addrs {
				nodeAddrs = append(nodeAddrs, a.String())
			}
			return nil
		})
		done <- result{e, err}
	}()
	listener := contract.ListenerName("mesh", "web")
	adstest.Eventually(t, "the enrolled pod's listener over LDS", func() bool { return rec.Has(resourcev3.ListenerType, listener) })
	g.Consistently(done).WithTimeout(300*time.Millisecond).ShouldNot(gomega.Receive(), "ADD returned before anything listened in the pod's netns")
	st := status(t, addr)
	if i := slices.IndexFunc(st.Listeners, func(l agentstatus.ListenerStatus) bool { return l.Name == listener }); i < 0 || st.Listeners[i].Netns != ns.Path() {
		t.Fatalf("listeners %+v: want %s in %s", st.Listeners, listener, ns.Path())
	}
	l, err := enrolltest.BindCapturePort(ns.Path()) // the proxy binds it
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var r result
	g.Eventually(done).WithTimeout(10 * time.Second).Should(gomega.Receive(&r))
	if r.err != nil || !r.enrolled {
		t.Fatalf("add of an enrolled pod: enrolled=%v err=%v", r.enrolled, r.err)
	}
	// The plugin's capture leaves alone exactly the node's addresses the listeners refuse.
	if refused := status(t, addr).NodeAddresses; !slices.Equal(nodeAddrs, refused) || len(nodeAddrs) != 2 {
		t.Errorf("the plugin was given node addresses %v; the listeners refuse %v (want 172.18.0.3 and 192.168.9.1 in both)", nodeAddrs, refused)
	}
	if e, err := cni.Check(ctx, pod); err != nil || !e {
		t.Errorf("check: enrolled=%v err=%v", e, err)
	}
	g.Expect(status(t, addr).Enrollment.Enrolled).To(gomega.Equal([]string{"mesh/web"}))
	g.Expect(addsObserved(t, addr)).To(gomega.Equal(map[string]uint64{"false/ok": 3, "true/error": 1, "true/ok": 1}),
		"the agent's ADD durations: three not enrolled, one refused, one enrolled")

	// A restarted agent binds the listener of a pod the plugin added before.
	stop()
	addr, _ = startAgent(ctx, t, cfg)
	rec, _, _ = dialAgent(ctx, t, sock)
	adstest.Eventually(t, "the restored pod's listener", func() bool { return rec.Has(resourcev3.ListenerType, listener) })

	// The DEL of an older sandbox of the same pod (same UID) leaves the current one alone.
	if err := cni.Del(ctx, enroll.Pod{Namespace: "mesh", Name: "web", UID: string(web.UID), ContainerID: "c0"}); err != nil {
		t.Fatalf("del of an old sandbox: %v", err)
	}
	g.Consistently(func() bool { return rec.Has(resourcev3.ListenerType, listener) }).WithTimeout(300*time.Millisecond).
		Should(gomega.BeTrue(), "the DEL of an old sandbox withdrew the pod's listener")
	if err := cni.Del(ctx, enroll.Pod{Namespace: "mesh", Name: "web", ContainerID: "c1"}); err != nil {
		t.Fatalf("del: %v", err)
	}
	adstest.Eventually(t, "the listener withdrawn after DEL", func() bool { return !rec.Has(resourcev3.ListenerType, listener) })

	// The ConfigMap narrows the selector: mesh no longer matches.
	must(c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{contract.KeyNamespaceSelector: "team=b"}}, metav1.CreateOptions{}))
	g.Eventually(func() string { return status(t, addr).Enrollment.NamespaceSelector }).WithTimeout(10 * time.Second).Should(gomega.Equal("team=b"))
	if e, err := cni.Add(ctx, pod, nil); err != nil || e {
		t.Errorf("add after the selector moved away: enrolled=%v err=%v", e, err)
	}
}

// TestEnrollmentOfAnUnknownPodFails: a pod the informer never shows is an error (the
// kubelet retries), not a silent pass-through.
func TestEnrollmentOfAnUnknownPodFails(t *testing.T) {
	rc, _, ctx, _ := startAPIServer(t)
	dir := t.TempDir()
	cni := enroll.Client{Socket: filepath.Join(dir, "enroll.sock"), Timeout: 30 * time.Second}
	startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(dir, "xds.sock"), NetnsDir: dir, EnrollSocket: cni.Socket})
	_, err := cni.Add(ctx, enroll.Pod{Namespace: "mesh", Name: "ghost", Netns: "/x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "not in the agent's informer") {
		t.Fatalf("add of a pod the agent cannot see: want an error saying so, got %v", err)
	}
}

// addsObserved counts the ADDs in the agent's request-duration histogram by
// "enrolled/result".
func addsObserved(t *testing.T, addr string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	f := families(t, addr)[contract.MetricCNIRequestDuration]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["op"] == string(enroll.OpAdd) {
			out[l["enrolled"]+"/"+l["result"]] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// gaugeOf reads one gauge from the agent's /metrics.
func gaugeOf(t *testing.T, addr, name string) float64 {
	t.Helper()
	f := families(t, addr)[name]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("/metrics: no single series %s", name)
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

func families(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
