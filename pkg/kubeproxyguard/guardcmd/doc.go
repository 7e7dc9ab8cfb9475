// Package guardcmd is the svclb-guard command line:
//
//	svclb-guard run    [--kubeconfig F] [--listen 127.0.0.1:9751] [--resync 1s] [--cut all|proxy] [--namespace-selector SEL]
//	    DaemonSet mode: guard the Services labelled svclb.dev/kube-proxy=deleted
//	    on this node (NODE_NAME), and every Service of the namespaces the agent
//	    enrolls (ConfigMap svclb-system/svclb-agent, key namespaceSelector, read
//	    as the agent reads it; --namespace-selector overrides it, not empty),
//	    never default/kubernetes; serve /status, /metrics, /healthz on the
//	    node's loopback only (no pod reaches it).
//	    --cut=all (default) overwrites kube-proxy's ClusterIP entries, for
//	    every client; --cut=proxy refuses only the node proxy's connections
//	    (SO_MARK 0xae7e) in table ip svclb-guard, and everyone else keeps
//	    kube-proxy.
//	svclb-guard list   [--json]
//	    print the Services that have ClusterIP entries in table ip kube-proxy.
//	svclb-guard delete [--timeout 30s] NS/NAME...
//	    delete those Services' kube-proxy ClusterIP entries once and exit
//	    (their NodePort and external-IP entries stay).
//	svclb-guard watch  [--listen ADDR] [--resync 1s] NS/NAME...
//	    keep deleting them until interrupted, without an apiserver.
//	svclb-guard get    [--addr 127.0.0.1:9751] PATH
//	    write the body of PATH of this node's guard (internal/loopget): how
//	    a reader gets /status through kubectl exec.
//
// list, delete and watch are for a person on a node. The DaemonSet's pod
// shares the node's network namespace, so the simplest way in is
//
//	kubectl -n svclb-system exec <svclb-guard pod on NODE> -- /svclb-guard list
package guardcmd
