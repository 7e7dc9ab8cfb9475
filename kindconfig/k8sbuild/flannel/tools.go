//go:build tools

// Package tools pins flanneld, the offline cluster's CNI daemon, with only its
// host-gw backend. flannel's own main package links every backend, and one of
// them (tencentvpc) needs a module the Go module proxy does not serve, so
// kindconfig.mk builds flannel's upstream main.go with the other backend
// imports removed. This list is main.go's import set after that edit, so that
// go.sum covers it. flannel has its own module because its requirements
// (client-go, netlink, ...) differ from those of Kubernetes and the add-ons.
package tools

import (
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/coreos/pkg/flagutil"
	_ "github.com/flannel-io/flannel/pkg/backend"
	_ "github.com/flannel-io/flannel/pkg/backend/hostgw"
	_ "github.com/flannel-io/flannel/pkg/ip"
	_ "github.com/flannel-io/flannel/pkg/ipmatch"
	_ "github.com/flannel-io/flannel/pkg/subnet"
	_ "github.com/flannel-io/flannel/pkg/subnet/etcd"
	_ "github.com/flannel-io/flannel/pkg/subnet/kube"
	_ "github.com/flannel-io/flannel/pkg/trafficmngr"
	_ "github.com/flannel-io/flannel/pkg/trafficmngr/iptables"
	_ "github.com/flannel-io/flannel/pkg/trafficmngr/nftables"
	_ "github.com/flannel-io/flannel/pkg/version"
	_ "github.com/joho/godotenv"
	_ "k8s.io/klog/v2"
)
