// Package kindconfig describes the suite's kind cluster: one control plane and
// two workers, kube-proxy in nftables mode, one zone per node.
//
// The cluster itself is created by `make cluster` from cluster.yaml (embedded
// here); this package lets Go code (the e2e suite, tests) read the same
// definition instead of repeating node names, zones or CIDRs. portable.yaml
// (PortableYAML) is a second, differently shaped cluster; Parse, LoadFile and
// Validate check any kind config for what the suite needs.
package kindconfig
