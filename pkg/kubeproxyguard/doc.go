// Package kubeproxyguard takes chosen Services off kube-proxy's ClusterIP
// path on a node, and keeps them off although kube-proxy restores it.
// Their NodePort, external-IP and load-balancer paths stay kube-proxy's.
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
// is no longer guarded; its ClusterIP entries stay deleted until
// kube-proxy's next full sync restores them. To force one, restart the node's kube-proxy pod
// (kubectl -n kube-system delete pod -l k8s-app=kube-proxy
// --field-selector spec.nodeName=NODE).
//
// # What is deleted
//
// Only in table ip kube-proxy, and only a chosen Service's ClusterIP entry
// points: the elements of service-ips and no-endpoint-services whose key
// ("ClusterIP . proto . port") leads with one of its ClusterIPs, one per
// Service port. kube-proxy (pkg/proxy/nftables/proxier.go, syncProxyRules)
// writes a Service's ClusterIP into the cluster-ips set and keys the two
// maps by it ("Capture the clusterIP"), but keys its external IPs and
// load-balancer IPs in the same two maps too; cluster-ips, which holds
// every active ClusterIP and nothing else, is what tells the two apart
// without the Service object. A service-ips element also has to jump to
// the Service's internal traffic chain (service- or local-; an external
// IP's jumps to external-), so an external IP that happens to be another
// Service's ClusterIP is not taken for one. The element's owner is the chain its verdict
// jumps to (service-ips: "goto service-<hash>-ns/name/tcp/http"; kube-proxy
// names a Service port's chains <prefix><HASH>-<ns>/<name>/<proto>/<port>,
// and the guard parses the name, never computes the hash) or kube-proxy's
// comment (no-endpoint-services: "ns/name:portName"; the verdict, "goto
// reject-chain" or "drop", names nothing).
//
// Everything else stays as kube-proxy wrote it: service-nodeports,
// no-endpoint-nodeports and firewall-ips elements, external-IP and
// load-balancer-IP elements, every chain of the Service (service-, local-,
// external-, firewall-, endpoint-) with its rules, its affinity- sets, and
// its cluster-ips element. So kube-proxy still serves <nodeIP>:<nodePort>
// and external IPs exactly as before (the mission: "kube-proxy stays
// installed for everything that is not a meshed pod's captured egress"),
// and an un-intercepted connection to the VIP meets kube-proxy's
// cluster-ips-check REJECT, deterministically. A table without the
// cluster-ips set is an error: the guard cuts nothing rather than guess.
// Both the v1.34 layout (endpoint- chains) and the v1.37 layout (one numgen
// dnat map per service- chain) are handled: they share these names.
//
// A pass (Reconcile) reads those elements and deletes the ones of chosen
// Services in one transaction. Transactions carry at most 64 elements
// (several Services each, a Service never split): the kernel acknowledges
// every one. DeleteNow runs passes until one succeeds.
//
// # Keeping them deleted
//
// kube-proxy restores the elements on a full sync (start-up, after a
// failed transaction, node label changes). Guard.Run subscribes to nftables events (nft monitor) and runs
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
//	    "state": "clean",                   // unknown | on-path | clean
//	    "remaining": [],                    // ClusterIP entries the last cut failed to delete
//	    "deleted": [                        // every ClusterIP entry deleted, once each
//	      {"kind": "element", "name": "service-ips: 10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http"},
//	      {"kind": "element", "name": "service-ips: 10.96.100.100 . tcp . 443 : goto service-LE7AQETR-default/demo/tcp/https"}
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
// "clean" means no ClusterIP entry of the Service is left in the table
// (kube-proxy's NodePort and external entries of it are not counted: they
// stay); "on-path" means the last cut failed and one is.
// The re-deletion latency runs from the guard observing the restore (the
// nft event's arrival, or the start of the periodic pass that found it) to
// the commit of the transaction that cut it again.
//
// # Files
//
// One job each:
//
//	guard.go     Guard, Options, New; the chosen set (SetServices)
//	run.go       Run (passes on nft events, every Resync, after a failure); DeleteNow
//	pass.go      Reconcile: one pass as read, cut, record
//	table.go     read: the ClusterIP entries of kube-proxy's table, grouped by Service (readTable)
//	element.go   read: which Service a verdict-map element belongs to; nft's notation
//	names.go     read: kube-proxy's chain and comment names taken apart
//	cut.go       cut: the transactions, grouped up to maxOps elements
//	record.go    record: per-Service state, metrics, re-deletion latency
//	status.go    Status and Handler (/status, /metrics, /healthz)
//	metrics.go   the Prometheus metrics
//	monitor.go   the nft event subscription that triggers passes
//	services.go  WatchServices: the labelled Services, from the apiserver
//	namespaces.go  WatchServicesByNamespace (--namespace-selector): and every Service of the selected namespaces
//	list.go      List: the read-only listing behind `svclb-guard list` (ClusterIP entries)
package kubeproxyguard
