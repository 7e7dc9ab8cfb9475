//go:build tools

// Package tools pins the Kubernetes commands this module builds, so that the
// module's requirements (k8s.io/kubernetes, its staging modules replaced by the
// published versions) stay complete. Build one with
// `go build k8s.io/kubernetes/cmd/<name>`; see ../kindconfig.mk.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
