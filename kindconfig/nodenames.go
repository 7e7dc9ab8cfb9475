package kindconfig

import (
	"fmt"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// NodeNames returns the Kubernetes Node name of every node, keyed by the name
// of the container kind creates for it (<cluster>-control-plane,
// <cluster>-worker, <cluster>-worker2, ...). They are equal unless a node's
// kubeadmConfigPatches set nodeRegistration.name (as portable.yaml does).
func NodeNames(c *v1alpha4.Cluster) (map[string]string, error) {
	names := map[string]string{}
	cp, w := 0, 0
	for i, n := range c.Nodes {
		var container string
		switch n.Role {
		case v1alpha4.ControlPlaneRole:
			cp++
			container = numbered(c.Name+"-control-plane", cp)
		case v1alpha4.WorkerRole:
			w++
			container = numbered(c.Name+"-worker", w)
		default:
			continue
		}
		name, err := registeredName(n.KubeadmConfigPatches)
		if err != nil {
			return nil, fmt.Errorf("nodes[%d]: %w", i, err)
		}
		if name == "" {
			name = container
		}
		names[container] = name
	}
	return names, nil
}

// registeredName is the nodeRegistration.name an Init- or JoinConfiguration
// patch sets, "" when none does.
func registeredName(patches []string) (string, error) {
	var name string
	for _, p := range patches {
		var doc struct {
			Kind             string `json:"kind"`
			NodeRegistration struct {
				Name string `json:"name"`
			} `json:"nodeRegistration"`
		}
		if err := yaml.Unmarshal([]byte(p), &doc); err != nil {
			return "", fmt.Errorf("kubeadmConfigPatches: %w", err)
		}
		if doc.Kind != "InitConfiguration" && doc.Kind != "JoinConfiguration" {
			continue
		}
		if n := doc.NodeRegistration.Name; n != "" {
			if name != "" && name != n {
				return "", fmt.Errorf("kubeadmConfigPatches name the node both %q and %q", name, n)
			}
			name = n
		}
	}
	return name, nil
}
