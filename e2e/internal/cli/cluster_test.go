package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aether-mesh/svclb/kindconfig"
)

func TestClusterOptionsResolve(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "portable.yaml")
	if err := os.WriteFile(cfg, kindconfig.PortableYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &clusterOptions{config: cfg}
	c, err := o.resolve("/repo")
	if err != nil {
		t.Fatal(err)
	}
	if o.name != "alt" || c.Name != "alt" {
		t.Errorf("name = %q (config %q), want alt from the config", o.name, c.Name)
	}
	if o.kubeconfigOut != "/repo/_output/kubeconfig-alt" {
		t.Errorf("kubeconfigOut = %q", o.kubeconfigOut)
	}
	o = &clusterOptions{config: cfg, name: "other", kubeconfigOut: "/k"}
	if _, err := o.resolve("/repo"); err != nil || o.name != "other" || o.kubeconfigOut != "/k" {
		t.Errorf("flags not kept: %+v %v", o, err)
	}
}

// TestClusterCreateBadInput: bad input is a usage error (exit 2) naming what is wrong,
// before kind is called.
func TestClusterCreateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	raw := strings.Replace(string(kindconfig.PortableYAML), "kubeProxyMode: nftables", "kubeProxyMode: iptables", 1)
	if err := os.WriteFile(bad, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "create"}, "--kind-config is required"},
		{[]string{"cluster", "create", "--kind-config", filepath.Join(dir, "none.yaml")}, "reading kind config"},
		{[]string{"cluster", "create", "--kind-config", bad}, "kubeProxyMode"},
		{[]string{"cluster", "delete"}, "--name is required"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append(tc.args, "--repo", dir), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// TestWaitNodesReady: create waits out a node still tainted not-ready, and names the nodes it
// waited for when they never come up.
func TestWaitNodesReady(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	up := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Conditions: ready}}
	late := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: corev1.NodeStatus{Conditions: ready},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}}}
	cs := fake.NewClientset(up, late)
	err := waitNodesReady(context.Background(), cs, 50*time.Millisecond, 10*time.Millisecond, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "b") || strings.Contains(err.Error(), "a,") {
		t.Fatalf("with b tainted not-ready: %v, want an error naming b only", err)
	}
	late.Spec.Taints = nil
	if _, err := cs.CoreV1().Nodes().Update(context.Background(), late, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitNodesReady(context.Background(), cs, time.Second, 10*time.Millisecond, io.Discard); err != nil {
		t.Fatalf("every node up: %v", err)
	}
}
