//go:build tools

// Package tools pins the node add-ons built from this module: etcd (the version
// kubeadm v1.34 deploys), CoreDNS (likewise) and the CNI plugins the node image
// ships. They live apart from ../go.mod so that their requirements cannot move
// the versions Kubernetes itself is built with.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/main/ptp"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/coredns/coredns"
	_ "go.etcd.io/etcd/server/v3"
)
