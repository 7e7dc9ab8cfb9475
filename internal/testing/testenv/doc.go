// Package testenv starts a real kube-apiserver and etcd for integration tests
// (controller-runtime's envtest), from the Kubernetes binaries `make
// k8s-test-bins` builds into _output/bin. When they are absent a test skips
// under `make unit` (SVCLB_UNIT=1) and fails under `make test`, naming that
// target (see package prereq).
package testenv
