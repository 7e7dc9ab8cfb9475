// Package testenv starts a real kube-apiserver and etcd for integration tests
// (controller-runtime's envtest), from the Kubernetes binaries `make
// k8s-test-bins` builds into _output/bin. Tests skip, naming that target, when
// the binaries are absent.
package testenv
