package kindconfig

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
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

// TestPerfYAML holds perf.yaml to cluster.yaml: every perf measurement assumes the suite's
// cluster, so the two may differ only in the control plane's kubeadm patches.
func TestPerfYAML(t *testing.T) {
	perf, err := Parse("perf.yaml", PerfYAML)
	if err != nil {
		t.Fatal(err)
	}
	base, err := Parse("cluster.yaml", ClusterYAML)
	if err != nil {
		t.Fatal(err)
	}
	if len(perf.KubeadmConfigPatches) != 1 {
		t.Fatalf("perf.yaml has %d cluster-wide kubeadm patches, want 1", len(perf.KubeadmConfigPatches))
	}
	var patch struct {
		Kind string `json:"kind"`
		Etcd struct {
			Local struct {
				ExtraArgs map[string]string `json:"extraArgs"`
			} `json:"local"`
		} `json:"etcd"`
		ControllerManager struct {
			ExtraArgs map[string]string `json:"extraArgs"`
		} `json:"controllerManager"`
		Scheduler struct {
			ExtraArgs map[string]string `json:"extraArgs"`
		} `json:"scheduler"`
	}
	// Strict: a misspelt section would be dropped by kubeadm without a word.
	if err := yaml.UnmarshalStrict([]byte(perf.KubeadmConfigPatches[0]), &patch); err != nil {
		t.Fatalf("perf.yaml's patch: %v", err)
	}
	// kind v0.33 writes kubeadm v1beta3 for Kubernetes below v1.36, where extraArgs is a map.
	if patch.Kind != "ClusterConfiguration" {
		t.Errorf("patch kind %q, want ClusterConfiguration", patch.Kind)
	}
	lease := map[string]string{"leader-elect-lease-duration": "60s", "leader-elect-renew-deadline": "45s"}
	for name, args := range map[string]map[string]string{"scheduler": patch.Scheduler.ExtraArgs, "controllerManager": patch.ControllerManager.ExtraArgs} {
		for k, v := range lease {
			if args[k] != v {
				t.Errorf("%s %s = %q, want %q", name, k, args[k], v)
			}
		}
	}
	if patch.Etcd.Local.ExtraArgs["unsafe-no-fsync"] != "true" {
		t.Errorf("etcd args %v, want unsafe-no-fsync", patch.Etcd.Local.ExtraArgs)
	}
	perf.KubeadmConfigPatches = nil
	if !reflect.DeepEqual(perf, base) {
		t.Errorf("perf.yaml without its kubeadm patch differs from cluster.yaml:\n perf %+v\n base %+v", perf, base)
	}
}
