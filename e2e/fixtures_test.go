package e2e

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// guardObjects returns the guard DaemonSet and what it needs, from fixtures/.
func guardObjects() ([]client.Object, string, error) {
	return nil, "", errors.New("fixtures: the guard manifests (fixtures/guard) are not available yet")
}

// nodeObjects returns the node DaemonSet svclb-node (agent + proxy) and what
// it needs, from fixtures/manifests.
func nodeObjects(proxy string) ([]client.Object, error) {
	return nil, errors.New("fixtures: the node DaemonSet manifests (fixtures/manifests) are not available yet")
}
