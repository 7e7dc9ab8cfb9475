package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/images"
)

func node(name, zone string, cp bool, images ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	if cp {
		n.Labels[cluster.LabelControlPlane] = ""
	}
	for _, im := range images {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{cluster.NormalizeImage(im)}})
	}
	return n
}

var devImages = []string{"svclb/agent:dev", "svclb/nodeproxy:dev", "svclb/capture:dev", "svclb/echo:dev", "svclb/guard:dev"}

func kubeProxyCM(mode string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Data: map[string]string{"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: " + mode + "\n"}}
}

func serviceCIDR() *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}
}

// find is the line of topic whose text has sub, or fails.
func find(t *testing.T, lines []Line, level Level, topic, sub string) {
	t.Helper()
	for _, l := range lines {
		if l.Topic == topic && l.Level == level && strings.Contains(l.Text, sub) {
			return
		}
	}
	t.Errorf("no %s %s line with %q in:\n%s", level, topic, sub, join(lines))
}

func join(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String() + "\n")
	}
	return b.String()
}

// TestKindLikeCluster: the suite's kind cluster passes every check.
func TestKindLikeCluster(t *testing.T) {
	cs := fake.NewClientset(kubeProxyCM("nftables"), serviceCIDR(),
		node("svclb-control-plane", "zone-c", true, devImages...), node("svclb-worker", "zone-a", false, devImages...),
		node("svclb-worker2", "zone-b", false, devImages...))
	lines := Run(context.Background(), cs, Options{Proxy: "builtin", Probe: inDocker})
	if Failed(lines) {
		t.Fatalf("failed:\n%s", join(lines))
	}
	find(t, lines, OK, "kube-proxy", "mode nftables (ConfigMap kube-system/kube-proxy)")
	find(t, lines, OK, "ServiceCIDR", "kubernetes=10.96.0.0/16")
	find(t, lines, OK, "nodes", "3, all Ready")
	find(t, lines, OK, "roles", "control plane: svclb-control-plane; workers: svclb-worker, svclb-worker2")
	find(t, lines, OK, "zones", "zone-a=svclb-worker zone-b=svclb-worker2 zone-c=svclb-control-plane")
	find(t, lines, OK, "image", "svclb/agent:dev on every node")
	find(t, lines, OK, "node access", "docker: every one of the 3 nodes is a running container of the local Docker engine")
	find(t, lines, OK, "schedulable", "svclb-control-plane, svclb-worker, svclb-worker2; no client pods on: none")
}

// TestTaintedNodes: doctor names the nodes the suite keeps its client pods off, and why; with
// none schedulable it fails.
func TestTaintedNodes(t *testing.T) {
	cp := node("alt-cp", "east", true)
	cp.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	cordoned := node("alt-west-1", "west", false)
	cordoned.Spec.Unschedulable = true
	lines := Run(context.Background(), fake.NewClientset(kubeProxyCM("nftables"), cp, cordoned, node("alt-east-1", "east", false)),
		Options{Proxy: "builtin", Probe: inDocker})
	find(t, lines, OK, "schedulable", "alt-east-1; no client pods on: alt-cp (node-role.kubernetes.io/control-plane:NoSchedule), alt-west-1 (cordoned)")

	lines = Run(context.Background(), fake.NewClientset(kubeProxyCM("nftables"), cp), Options{Proxy: "builtin", Probe: inDocker})
	find(t, lines, Fail, "schedulable", "none; no client pods on: alt-cp")
}

// inDocker: every node is a running container of the local Docker engine (no addresses: the
// fake nodes have no InternalIP).
func inDocker(context.Context, string) (bool, []string, error) { return true, nil, nil }

// TestNodeAccess: doctor says which node access the suite would take and why, and in
// daemonset mode checks the node-access image too.
func TestNodeAccess(t *testing.T) {
	notDocker := func(_ context.Context, name string) (bool, []string, error) {
		return false, nil, fmt.Errorf("docker inspect %s: no such container", name)
	}
	objs := []runtime.Object{kubeProxyCM("nftables"), node("w", "a", false, devImages...)}
	lines := Run(context.Background(), fake.NewClientset(objs...), Options{Proxy: "builtin", Probe: notDocker})
	find(t, lines, OK, "node access", "daemonset: node w is not a container of the local Docker engine: docker inspect w: no such container")
	find(t, lines, Fail, "image", "svclb/nodeexec:dev missing on w")

	lines = Run(context.Background(), fake.NewClientset(objs...), Options{Proxy: "builtin", Probe: inDocker, NodeAccess: cluster.NodeAccessDaemonSet})
	find(t, lines, OK, "node access", "daemonset: as asked")
}

// TestWhatIsMissing: each requirement missing gives its own clear line, and the run fails.
func TestWhatIsMissing(t *testing.T) {
	notReady := node("w2", "zone-a", false)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, c := range []struct {
		name  string
		objs  []runtime.Object
		proxy string
		level Level
		topic string
		text  string
	}{
		{"iptables kube-proxy", []runtime.Object{kubeProxyCM("iptables"), node("w", "a", false, devImages...)}, "builtin", Fail, "kube-proxy", `mode "iptables"`},
		{"no kube-proxy", []runtime.Object{node("w", "a", false, devImages...)}, "builtin", Fail, "kube-proxy", "no ConfigMap or DaemonSet"},
		{"mode in the DaemonSet's flags", []runtime.Object{node("w", "a", false, devImages...), &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Command: []string{"kube-proxy", "--proxy-mode=nftables"}}}}}}}}, "builtin", OK, "kube-proxy", "--proxy-mode"},
		{"no ServiceCIDR", []runtime.Object{kubeProxyCM("nftables")}, "builtin", Warn, "ServiceCIDR", "none"},
		{"no worker", []runtime.Object{kubeProxyCM("nftables"), node("cp", "a", true, devImages...)}, "builtin", Fail, "roles", "workers: none"},
		{"one zone", []runtime.Object{kubeProxyCM("nftables"), node("w", "a", false, devImages...)}, "builtin", Warn, "zones", "topology leg skips"},
		{"a node not Ready", []runtime.Object{kubeProxyCM("nftables"), node("w", "a", false, devImages...), notReady}, "builtin", Fail, "nodes", "not Ready: w2"},
		{"an image not loaded", []runtime.Object{kubeProxyCM("nftables"), node("w", "a", false, devImages[1:]...)}, "builtin", Fail, "image", "svclb/agent:dev missing on w"},
		{"a full status image list", []runtime.Object{kubeProxyCM("nftables"), node("w", "a", false, fullList()...)}, "builtin", Warn, "image", "lists only the 50 largest"},
		{"Envoy not on the nodes", []runtime.Object{kubeProxyCM("nftables"), node("w", "a", false, devImages...)}, "envoy", Warn, "image", "pulled at deploy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := Run(context.Background(), fake.NewClientset(c.objs...), Options{Proxy: c.proxy, Probe: inDocker})
			find(t, lines, c.level, c.topic, c.text)
			if c.level == Fail && !Failed(lines) {
				t.Error("Failed() = false with a FAIL line")
			}
		})
	}
}

// fullList is a node status image list at the kubelet's cap, without the project's images.
func fullList() []string {
	var out []string
	for i := range statusImagesCap {
		out = append(out, fmt.Sprintf("registry.example/big%d:v1", i))
	}
	return out
}

// TestRegistryImages: with a registry the project's images are pulled at deploy, so nodes that
// hold none of them pass, with a line saying where they come from and that it is not checked.
func TestRegistryImages(t *testing.T) {
	lines := Run(context.Background(), fake.NewClientset(kubeProxyCM("nftables"), node("w", "a", false)),
		Options{Proxy: "builtin", Probe: inDocker, NodeAccess: cluster.NodeAccessDaemonSet, Source: images.MustParse("registry.example.com/ci")})
	if Failed(lines) {
		t.Fatalf("failed:\n%s", join(lines))
	}
	find(t, lines, OK, "image", "the project's images are pulled from registry.example.com/ci at deploy (registry.example.com/ci/svclb/<name>:dev): not checked here")
}
