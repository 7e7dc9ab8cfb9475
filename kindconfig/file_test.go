package kindconfig

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

func TestPortableShape(t *testing.T) {
	c, err := Parse("portable.yaml", PortableYAML)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "alt" {
		t.Errorf("name = %q, want alt", c.Name)
	}
	svc := netip.MustParsePrefix(c.Networking.ServiceSubnet)
	if netip.MustParsePrefix("10.96.0.0/12").Overlaps(svc) {
		t.Errorf("serviceSubnet %s is inside 10.96.0.0/12, the shape must not be", svc)
	}
	names, err := NodeNames(c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"alt-control-plane": "alt-cp",
		"alt-worker":        "alt-east-1",
		"alt-worker2":       "alt-west-1",
		"alt-worker3":       "alt-west-2",
	}
	if !maps.Equal(names, want) {
		t.Errorf("NodeNames = %v, want %v", names, want)
	}
	zones := map[string]bool{}
	for _, n := range c.Nodes {
		zones[n.Labels[ZoneLabel]] = true
		if n.Role == v1alpha4.ControlPlaneRole {
			for _, p := range n.KubeadmConfigPatches {
				if strings.Contains(p, "taints") {
					t.Errorf("control plane patch %q touches taints: it must keep kind's NoSchedule taint", p)
				}
			}
		}
	}
	if !maps.Equal(zones, map[string]bool{"east": true, "west": true}) {
		t.Errorf("zones = %v, want east and west", zones)
	}
}

func TestClusterYAMLValidates(t *testing.T) {
	if _, err := Parse("cluster.yaml", ClusterYAML); err != nil {
		t.Fatal(err)
	}
	c, _ := Config()
	names, err := NodeNames(c)
	if err != nil {
		t.Fatal(err)
	}
	for container, node := range names {
		if container != node {
			t.Errorf("cluster.yaml renames %s to %s; its Nodes keep kind's names", container, node)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	good := func() *v1alpha4.Cluster {
		c, err := Parse("portable.yaml", PortableYAML)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for name, tc := range map[string]struct {
		mutate func(*v1alpha4.Cluster)
		want   string
	}{
		"iptables":      {func(c *v1alpha4.Cluster) { c.Networking.KubeProxyMode = v1alpha4.IPTablesProxyMode }, "kubeProxyMode"},
		"no CNI":        {func(c *v1alpha4.Cluster) { c.Networking.DisableDefaultCNI = true }, "disableDefaultCNI"},
		"overlap":       {func(c *v1alpha4.Cluster) { c.Networking.PodSubnet = "10.128.128.0/17" }, "overlaps"},
		"bad CIDR":      {func(c *v1alpha4.Cluster) { c.Networking.ServiceSubnet = "10.128.0.0" }, "serviceSubnet"},
		"no zone":       {func(c *v1alpha4.Cluster) { delete(c.Nodes[2].Labels, ZoneLabel) }, "nodes[2]"},
		"two CPs":       {func(c *v1alpha4.Cluster) { c.Nodes[1].Role = v1alpha4.ControlPlaneRole }, "2 control-plane"},
		"no service IP": {func(c *v1alpha4.Cluster) { c.Networking.ServiceSubnet = "" }, "serviceSubnet"},
	} {
		t.Run(name, func(t *testing.T) {
			c := good()
			tc.mutate(c)
			err := Validate(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestLoadFileRejectsUnknownFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, append(append([]byte{}, PortableYAML...), "kubeProxyMod: iptables\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("LoadFile = %v, want an error naming %s", err, p)
	}
}

func TestNodeNamesConflictingPatches(t *testing.T) {
	c := &v1alpha4.Cluster{Name: "x", Nodes: []v1alpha4.Node{{Role: v1alpha4.WorkerRole, KubeadmConfigPatches: []string{
		"kind: JoinConfiguration\nnodeRegistration:\n  name: a\n",
		"kind: JoinConfiguration\nnodeRegistration:\n  name: b\n",
	}}}}
	if _, err := NodeNames(c); err == nil {
		t.Fatal("NodeNames accepted two names for one node")
	}
}
