// Package guardcmd is the svclb-guard command line:
//
//	svclb-guard run    [--kubeconfig F] [--listen $POD_IP:9751] [--resync 1s] [--namespace-selector SEL]
//	    DaemonSet mode: guard the Services labelled svclb.dev/kube-proxy=deleted
//	    on this node (NODE_NAME), serve /status, /metrics, /healthz on the pod's
//	    IP (POD_IP; loopback without it), never every interface. With
//	    --namespace-selector (e.g. svclb.dev/mesh=enabled, the namespaces
//	    svclb-cni enrolls) also every Service of the matching namespaces,
//	    never default/kubernetes.
//	svclb-guard list   [--json]
//	    print the Services that have ClusterIP entries in table ip kube-proxy.
//	svclb-guard delete [--timeout 30s] NS/NAME...
//	    delete those Services' kube-proxy ClusterIP entries once and exit
//	    (their NodePort and external-IP entries stay).
//	svclb-guard watch  [--listen ADDR] [--resync 1s] NS/NAME...
//	    keep deleting them until interrupted, without an apiserver.
//
// list, delete and watch are for a person on a node. The DaemonSet's pod
// shares the node's network namespace, so the simplest way in is
//
//	kubectl -n svclb-system exec <svclb-guard pod on NODE> -- /svclb-guard list
package guardcmd
