package kindconfig

import (
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// PortableYAML is the second cluster's configuration: shaped unlike cluster.yaml
// (see portable.yaml) so that what the suite assumes about its cluster shows.
//
//go:embed portable.yaml
var PortableYAML []byte

// PerfYAML is cluster.yaml's cluster with a control plane sized for `make perf` at 5,000
// Services on 2 cores (see perf.yaml): the same nodes, zones and CIDRs, only
// kubeadmConfigPatches added.
//
//go:embed perf.yaml
var PerfYAML []byte

// Parse reads a kind v1alpha4 config strictly (an unknown field is an error:
// kind would ignore it) and checks it with Validate. what names it in errors.
func Parse(what string, raw []byte) (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", what, err)
	}
	if err := Validate(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &c, nil
}

// LoadFile is Parse of the file at path.
func LoadFile(path string) (*v1alpha4.Cluster, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading kind config: %w", err)
	}
	return Parse(path, raw)
}

// Validate checks what the suite needs of any cluster it runs on, beyond what
// kind checks itself: kube-proxy in nftables mode (the agent cuts its table),
// the node image's CNI, Service and pod CIDRs given and disjoint, one control
// plane (more needs kind's load-balancer image, absent offline), and a zone on
// every node (the topology legs read it).
func Validate(c *v1alpha4.Cluster) error {
	var errs []error
	n := c.Networking
	if n.KubeProxyMode != v1alpha4.NFTablesProxyMode {
		errs = append(errs, fmt.Errorf("networking.kubeProxyMode is %q, want %q", n.KubeProxyMode, v1alpha4.NFTablesProxyMode))
	}
	if n.DisableDefaultCNI {
		errs = append(errs, errors.New("networking.disableDefaultCNI is true: the suite uses the node image's CNI"))
	}
	svc, err1 := netip.ParsePrefix(n.ServiceSubnet)
	if err1 != nil {
		errs = append(errs, fmt.Errorf("networking.serviceSubnet: %w", err1))
	}
	pod, err2 := netip.ParsePrefix(n.PodSubnet)
	if err2 != nil {
		errs = append(errs, fmt.Errorf("networking.podSubnet: %w", err2))
	}
	if err1 == nil && err2 == nil && svc.Overlaps(pod) {
		errs = append(errs, fmt.Errorf("networking.serviceSubnet %s overlaps podSubnet %s", svc, pod))
	}
	var cps int
	for i, node := range c.Nodes {
		if node.Role == v1alpha4.ControlPlaneRole {
			cps++
		}
		if node.Labels[ZoneLabel] == "" {
			errs = append(errs, fmt.Errorf("nodes[%d] (%s) has no %s label", i, node.Role, ZoneLabel))
		}
	}
	if cps != 1 {
		errs = append(errs, fmt.Errorf("%d control-plane nodes, want 1", cps))
	}
	return errors.Join(errs...)
}
