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
// Nodes, the suite's own node exec (fixtures/cluster Cluster.NodeExec) with the suite's
// choice of node access (Cluster.ChooseAccess: docker exec on kind, else the node-access
// DaemonSet). In daemonset mode the uninstaller deploys that DaemonSet first (or updates a
// kept run's), waits for its pod on every node and has every node answer through it; the
// DaemonSet and its namespace svclb-system are deleted last, after the verification, whether
// it passed or not (RestoreGuard deletes it only when it deployed it).
//
//	nft.go        Inspect: what a captured ruleset holds of svclb (golden-tested on captured text)
//	nodes.go      Nodes, and the node access the reads stand on (daemonset mode: deploy, delete last)
//	objects.go    what svclb deploys, deleted through a clientset
//	uninstall.go  Uninstall and RestoreGuard: the order above, then the verification
package uninstall
