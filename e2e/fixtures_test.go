package e2e

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/envoy"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/manifests"
)

// guardObjects returns the guard DaemonSet and what it needs, from fixtures/guard.
func guardObjects() ([]client.Object, string) {
	o := guard.Defaults()
	o.Namespace = systemNS
	o.Port = guardPort
	// Images are kind-loaded, never pulled.
	o.ImagePullPolicy = corev1.PullNever
	return guard.Objects(o), guard.Name
}

// nodeObjects returns the node DaemonSet svclb-node (agent + proxy) and what
// it needs, from fixtures/manifests. Both phases start off: the legs flip them.
func nodeObjects(proxy string) ([]client.Object, error) {
	o := manifests.NodeOptions{}
	switch proxy {
	case "builtin":
	case "envoy":
		// One bootstrap for every node: the DaemonSet's --service-node
		// (svclb-node~$(NODE_NAME)) overrides this placeholder node id.
		b, err := envoy.BootstrapYAML(envoy.BootstrapOptions{NodeID: "svclb-node~from-command-line"})
		if err != nil {
			return nil, err
		}
		o.Proxy = manifests.EnvoyProxy(getenv("SVCLB_ENVOY_IMAGE", envoy.Image), b)
	default:
		return nil, fmt.Errorf("proxy %q: want envoy or builtin", proxy)
	}
	return manifests.Node(o), nil
}

// meshed makes a pod a meshed pod with the fixtures' capture init container.
// The suite's clients are never hostNetwork, the one case Mesh refuses.
func meshed(p *corev1.Pod) *corev1.Pod {
	m, err := manifests.MeshedPod(p, manifests.DefaultImages().Capture)
	if err != nil {
		panic(fmt.Sprintf("mesh %s: %v", p.Name, err))
	}
	return m
}
