// Package kube holds what the legs do to the live kind cluster beyond plain
// object CRUD (which they do through e2e-framework's klient): reading the
// agent's and the guard's HTTP endpoints through the apiserver's pod proxy,
// flipping the agent's Phase flags and waiting until every node applied them,
// running commands in pods and on the kind node containers, and reading
// Prometheus metrics.
package kube
