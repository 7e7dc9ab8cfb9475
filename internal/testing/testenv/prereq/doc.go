// Package prereq decides what a test does when the machine lacks something it
// needs (root, a program, a Kubernetes binary):
//
//	prereq.Root(t, "creates a network namespace")
//	prereq.Missing(t, "kube-apiserver not found in %s", dir)
//
// With SVCLB_UNIT=1 (`make unit`: no root, nothing built) the test skips with
// one line saying what is missing. Without it (`make test`, a plain go test)
// the test fails: the tier that promises to run everything must never pass by
// skipping. internal/testing/netnstest and internal/testing/testenv call it, so
// every netns and envtest test follows the same rule.
package prereq
