package kindconfig

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// ZoneLabel is the node label that carries each node's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// DefaultName is cluster.yaml's cluster name: what the CLIs and suites connect to when not
// told otherwise (TestConfig holds the two together).
const DefaultName = "svclb"

// ClusterYAML is the kind cluster configuration `make cluster` uses.
//
//go:embed cluster.yaml
var ClusterYAML []byte

// Config parses ClusterYAML. Unknown fields are an error, so a typo in
// cluster.yaml fails here rather than being ignored by kind.
func Config() (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(ClusterYAML, &c); err != nil {
		return nil, fmt.Errorf("parsing kindconfig/cluster.yaml: %w", err)
	}
	return &c, nil
}

// NodeZones returns the zone of every node, keyed by the node name kind gives it
// (<cluster>-control-plane, <cluster>-worker, <cluster>-worker2, ...).
func NodeZones(c *v1alpha4.Cluster) map[string]string {
	zones := map[string]string{}
	cp, w := 0, 0
	for _, n := range c.Nodes {
		var name string
		switch n.Role {
		case v1alpha4.ControlPlaneRole:
			cp++
			name = numbered(c.Name+"-control-plane", cp)
		case v1alpha4.WorkerRole:
			w++
			name = numbered(c.Name+"-worker", w)
		default:
			continue
		}
		zones[name] = n.Labels[ZoneLabel]
	}
	return zones
}

// numbered mirrors kind's node naming: the first node of a role has no suffix.
func numbered(base string, i int) string {
	if i == 1 {
		return base
	}
	return fmt.Sprintf("%s%d", base, i)
}
