// Package translate turns Kubernetes Services, EndpointSlices and captured pods into the Envoy
// resources the svclb node agent publishes (docs/architecture.md, "xDS the agent emits").
//
// Everything here is a pure function of its inputs so each row of docs/design.md ("What a svc: cluster says") is a table test.
// Validate checks a whole resource set before the agent publishes it.
//
// sessionAffinity ClientIP maps to RING_HASH plus tcp_proxy hash_policy source_ip. Its
// timeoutSeconds has no Envoy counterpart: a client keeps its backend for as long as the
// endpoint set is unchanged, not for a fixed time after its last connection.
package translate
