// Package contract is the one place where the names the pieces of svclb share
// are spelled: the agent, the node proxy (Envoy or the built-in one), the
// guard, the capture rules, the manifests and the suite all read them from
// here, and their tests check against these values rather than a copy.
//
// It holds Kubernetes names (namespace, labels, ConfigMap keys), node paths,
// ports, packet marks and the xDS names (listeners, filter chains, clusters,
// stat names). The xDS message shapes themselves are built by one package,
// internal/translate, which the agent emits with and the node proxy's tests
// feed to the proxy.
package contract
