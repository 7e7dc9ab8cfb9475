// Package enroll puts Kubernetes' own e2e namespaces through the agent and
// takes them out again: the node DaemonSet with svclb-cni (fixtures/agent,
// fixtures/manifests), the agent's namespace selector matching the namespaces
// the e2e framework creates (it labels each e2e-framework=<baseName>), and
// every Service in them cut from kube-proxy's ClusterIP path (their
// NodePorts stay kube-proxy's) — by the guard's namespace selector (the
// runner's default), or by labelling each Service
// svclb.dev/kube-proxy=deleted as it appears (Labeler).
//
// Phase sets the agent's phases with refusal: reset, so that a Service without
// endpoints refuses at the SYN in green (docs/peer.md).
//
// Restore puts back what Enroll found: the agent ConfigMap's keys, the node
// DaemonSet without the plugin (its conflist entry removed), the guard as the
// suite deploys it (guard.Defaults).
package enroll
