// Package kubeproxyguard takes chosen Services off kube-proxy's nftables
// path on a node, and keeps them off although kube-proxy restores them.
//
// # Choosing
//
// A Service is chosen by the label svclb.dev/kube-proxy=deleted (Label,
// LabelValue: contract.KubeProxyLabel, contract.KubeProxyCut);
// WatchServices feeds the chosen set to a Guard with client-go.
// In namespace-selector mode (WatchServicesByNamespace, svclb-guard run
// --namespace-selector) every Service of a namespace the selector matches is
// chosen too, labelled or not: the namespaces whose pods svclb-cni meshes
// (docs/enrollment.md). A client that is not meshed, in any namespace, then
// meets kube-proxy's REJECT on those Services, as on a labelled one.
// All ports of a chosen Service are guarded. The apiserver's Service
// (contract.APIServerService, default/kubernetes) is never guarded, labelled
// or not: it stays on kube-proxy's path (Proposal 044, Non-goals), since
// svclb never gives it a svc: cluster. The guard logs the refusal once and
// lists it under "refused" in /status; the CLI's delete and watch reject it.
// A Service that loses the label (or whose namespace stops matching)
// is no longer guarded; its objects stay deleted until kube-proxy's next
// full sync restores them. To force one, restart the node's kube-proxy pod
// (kubectl -n kube-system delete pod -l k8s-app=kube-proxy
// --field-selector spec.nodeName=NODE).
//
// # What is deleted
//
// Only in table ip kube-proxy, and only objects kube-proxy named for a
// chosen Service. kube-proxy names a Service port's chains and sets
// <prefix><HASH>-<ns>/<name>/<proto>/<portName>[__<endpointIP>/<port>];
// the "/" is what kube-proxy itself uses to tell them from its stock
// chains. The guard parses those names, never computes the hash:
//
//   - elements of service-ips, firewall-ips and service-nodeports whose
//     verdict jumps to such a chain ("goto service-…-ns/name/tcp/http");
//   - elements of no-endpoint-services and no-endpoint-nodeports whose
//     comment is the Service port ("ns/name:portName"), as kube-proxy writes
//     it (their verdict, "goto reject-chain" or "drop", names nothing);
//   - the service-, local-, external-, firewall- and endpoint- chains, and
//     the affinity- sets (session affinity).
//
// The cluster-ips element stays: an un-intercepted connection to the VIP
// is then REJECTed by kube-proxy's cluster-ips-check, deterministically.
// Shared objects (hairpin-connections in v1.37, nodeport-ips) stay too.
// Both the v1.34 layout (endpoint- chains) and the v1.37 layout (one
// numgen dnat map per service- chain) are handled: they share these names.
//
// A pass (Reconcile) reads the table, cuts each Service on kube-proxy's
// path in one transaction (map elements, then flushing its chains, then
// deleting its affinity sets) and deletes the chains of Services cut at
// least ChainDeleteDelay (1 s) earlier in a second transaction, as
// kube-proxy does: kernels before 6.2 release a deleted element's reference
// late. Transactions carry at most 64 operations (several Services each, a
// Service never split): the kernel acknowledges every one. DeleteNow runs
// passes until the chosen Services are gone.
//
// # Keeping them deleted
//
// kube-proxy restores everything on a full sync (start-up, after a failed
// transaction — which deleting behind its back causes —, node label
// changes). Guard.Run subscribes to nftables events (nft monitor) and runs
// a pass after any addition, so a restore is cut again within milliseconds;
// a periodic pass (Options.Resync) backs it up. When the kernel closes the
// subscription (ENOBUFS) it is renewed and a pass runs.
//
// # Status
//
// Guard.Handler serves /metrics (Prometheus, prefix svclb_guard_), /healthz
// and /status, the JSON form of Status (the DaemonSet listens on
// contract.GuardPort in the host network; read it through the apiserver's
// pod proxy:
// /api/v1/namespaces/svclb-system/pods/<pod>:9751/proxy/status):
//
//	{
//	  "node": "kind-worker",
//	  "table": "ip kube-proxy",
//	  "tablePresent": true,
//	  "monitor": {"subscribed": true, "resubscriptions": 0},  // "lastError" once one happened
//	  "passes": 42,
//	  "lastPass": "2026-11-29T16:00:00Z",
//	  "lastPassError": "",                  // omitted when empty
//	  "services": [{
//	    "namespace": "default", "name": "demo",
//	    "guardedSince": "2026-11-29T15:59:00Z",
//	    "state": "clean",                   // unknown | on-path | cut | clean
//	    "remaining": [],                    // what the last pass found
//	    "deleted": [                        // every object deleted, once each
//	      {"kind": "chain",   "name": "service-C642UMGT-default/demo/tcp/http"},
//	      {"kind": "element", "name": "service-ips: 10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http"}
//	    ],
//	    "deletions": 3,                     // cut transactions
//	    "redeletions": 2,                   // cuts after kube-proxy restored it
//	    "lastRedeletion": "2026-11-29T16:00:00Z",  // omitted before the first
//	    "lastRedeletionLatencySeconds": 0.0021,    // restore observed -> cut committed
//	    "errors": 0                         // "lastError" once one happened
//	  }],
//	  "refused": [{                         // chosen, never cut (Refuse)
//	    "namespace": "default", "name": "kubernetes",
//	    "reason": "the apiserver's Service stays on kube-proxy's path (…)"
//	  }]
//	}
//
// "cut" means kube-proxy no longer routes the Service on this node (its
// empty chains wait for deletion); "clean" means nothing of it is left.
// The re-deletion latency runs from the guard observing the restore (the
// nft event's arrival, or the start of the periodic pass that found it) to
// the commit of the transaction that cut it again.
//
// # Files
//
// One job each:
//
//	guard.go     Guard, Options, New; the chosen set (SetServices)
//	run.go       Run (passes on nft events, every Resync, when chains are due); DeleteNow
//	pass.go      Reconcile: one pass as read, cut, delete, record
//	table.go     read: kube-proxy's table grouped by Service (readTable)
//	element.go   read: which Service a verdict-map element belongs to; nft's notation
//	names.go     read: kube-proxy's chain, set and comment names taken apart
//	cut.go       cut and delete: the two transactions, grouped up to maxOps operations
//	record.go    record: per-Service state, metrics, re-deletion latency
//	status.go    Status and Handler (/status, /metrics, /healthz)
//	metrics.go   the Prometheus metrics
//	monitor.go   the nft event subscription that triggers passes
//	services.go  WatchServices: the labelled Services, from the apiserver
//	namespaces.go  WatchServicesByNamespace (--namespace-selector): and every Service of the selected namespaces
//	list.go      List: the read-only listing behind `svclb-guard list`
package kubeproxyguard
