package kindconfig

import (
	"maps"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

func TestConfig(t *testing.T) {
	c, err := Config()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != DefaultName {
		t.Errorf("name = %q, want DefaultName %q", c.Name, DefaultName)
	}
	n := c.Networking
	if n.KubeProxyMode != v1alpha4.NFTablesProxyMode {
		t.Errorf("kubeProxyMode = %q, want nftables", n.KubeProxyMode)
	}
	if n.ServiceSubnet != "10.96.0.0/16" || n.PodSubnet != "10.244.0.0/16" {
		t.Errorf("subnets = service %q pod %q, want 10.96.0.0/16 and 10.244.0.0/16", n.ServiceSubnet, n.PodSubnet)
	}
	if n.DisableDefaultCNI {
		t.Error("disableDefaultCNI must stay false: the node image's default CNI (kindnetd or flannel) is the cluster's")
	}
	want := map[string]string{
		"svclb-control-plane": "zone-c",
		"svclb-worker":        "zone-a",
		"svclb-worker2":       "zone-b",
	}
	if got := NodeZones(c); !maps.Equal(got, want) {
		t.Errorf("NodeZones = %v, want %v", got, want)
	}
	// Offline there is no load-balancer image: exactly one control plane.
	var cps int
	for _, node := range c.Nodes {
		if node.Role == v1alpha4.ControlPlaneRole {
			cps++
			if len(node.KubeadmConfigPatches) != 1 || !strings.Contains(node.KubeadmConfigPatches[0], "taints: []") {
				t.Errorf("control plane patches = %q, want one InitConfiguration patch with taints: []", node.KubeadmConfigPatches)
			}
		}
	}
	if cps != 1 {
		t.Errorf("%d control-plane nodes, want 1", cps)
	}
}

func TestConfigRejectsUnknownFields(t *testing.T) {
	saved := ClusterYAML
	t.Cleanup(func() { ClusterYAML = saved })
	ClusterYAML = append(append([]byte{}, saved...), []byte("kubeProxyMod: iptables\n")...)
	if _, err := Config(); err == nil {
		t.Fatal("Config accepted an unknown field")
	}
}

func TestNodeZonesNumbering(t *testing.T) {
	c := &v1alpha4.Cluster{Name: "x", Nodes: []v1alpha4.Node{
		{Role: v1alpha4.ControlPlaneRole},
		{Role: v1alpha4.WorkerRole, Labels: map[string]string{ZoneLabel: "a"}},
		{Role: v1alpha4.ControlPlaneRole, Labels: map[string]string{ZoneLabel: "c2"}},
		{Role: v1alpha4.WorkerRole, Labels: map[string]string{ZoneLabel: "b"}},
		{Role: v1alpha4.WorkerRole},
	}}
	want := map[string]string{"x-control-plane": "", "x-control-plane2": "c2", "x-worker": "a", "x-worker2": "b", "x-worker3": ""}
	if got := NodeZones(c); !maps.Equal(got, want) {
		t.Errorf("NodeZones = %v, want %v", got, want)
	}
}
