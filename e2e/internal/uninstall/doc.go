// Package e2euninstall takes svclb off a cluster and proves it is off (svclb-e2e uninstall),
// and puts back what an interrupted run leaves cutting (RestoreGuard, svclb-e2e run's signal
// path).
//
// What is removed: the guard DaemonSet first (while it runs it cuts again whatever is put
// back), then the node DaemonSet (agent and node proxy; its cni-install container removes
// svclb-cni's conflist and binary once the DaemonSet no longer runs it, internal/cniinstall),
// every other object fixtures/guard and fixtures/agent render (RBAC, ConfigMaps, the
// namespace svclb-system), and the namespaces the suites run their workloads in.
//
// What is put back: kube-proxy's ClusterIP entries the guard overwrote (verdict continue,
// comment pkg/kubeproxyguard.CutCommentPrefix...). A node whose table still holds one has
// its kube-proxy pod restarted: its full sync at start writes every element as kube-proxy
// wants it (pkg/kubeproxyguard's doc, "Choosing"). The guard's own table (contract.GuardTable,
// left by a guard deleted in proxy mode) is deleted, and a conflist or plugin binary the
// installer did not remove is removed.
//
// What is verified, on every node: its nftables ruleset (nft list ruleset) holds no table
// whose name has "svclb" and kube-proxy's table is there and holds no cut element
// (Inspect); with Uninstall, no svclb-cni conflist or binary either. Nodes are read through
// Nodes: a kind node is its container (docker exec, fixtures/cluster.NodeExec's way).
//
//	nft.go        Inspect: what a captured ruleset holds of svclb (golden-tested on captured text)
//	nodes.go      Nodes, and Docker (kind's node containers)
//	objects.go    what svclb deploys, deleted through a clientset
//	uninstall.go  Uninstall and RestoreGuard: the order above, then the verification
package uninstall
