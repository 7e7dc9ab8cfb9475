// Package kubeproxyguard takes chosen Services off kube-proxy's ClusterIP
// path on a node, and keeps them off although kube-proxy restores it, for
// the ports the meshed path serves instead (TCP other than 53). Their other
// ports, and their NodePort, external-IP and load-balancer paths, stay
// kube-proxy's.
//
// # Choosing
//
// A Service is chosen by the label svclb.dev/kube-proxy=deleted (Label,
// LabelValue: contract.KubeProxyLabel, contract.KubeProxyCut);
// WatchServices feeds the chosen set to a Guard with client-go.
// The DaemonSet (svclb-guard run, WatchServicesByNamespace) also chooses
// every Service of a namespace the agent enrolls, labelled or not: the
// namespaces whose pods svclb-cni meshes (docs/enrollment.md). The selector
// is the agent's own: ConfigMap svclb-agent in svclb-system, key
// namespaceSelector (contract.AgentConfigMap, contract.KeyNamespaceSelector),
// watched and read by the agent's rule (internal/nsselector, the code the
// agent parses it with): absent key or ConfigMap,
// contract.DefaultNamespaceSelector; "", every namespace; a value that does
// not parse keeps the last good selector (at start-up, the default) and is
// reported in /status ("namespaceSelector.refused") and logged once. So the
// two read one value one way, and a namespace that leaves the selector has
// its Services' cuts put back at once (Putting back). They can differ only
// while a bad value stands and one of them started after it was written:
// that one keeps the default, the other its last good value (both say so in
// /status).
// --namespace-selector overrides the ConfigMap (NamespaceSelection.Override):
// /status then shows the agent's selector next to it, and the guard warns
// while they differ. A client that is not meshed, in any namespace, meets
// kube-proxy's REJECT on those Services' cut ports, as on a labelled one
// (with --cut=proxy, only the node proxy does: The proxy cut). Only the ports
// the meshed path takes over are cut (What is cut). The
// apiserver's Service
// (contract.APIServerService, default/kubernetes) is never guarded, labelled
// or not: it stays on kube-proxy's path (Proposal 044, Non-goals), since
// svclb never gives it a svc: cluster. The guard logs the refusal once and
// lists it under "refused" in /status; the CLI's delete and watch reject it.
// A Service that loses the label (or whose namespace stops matching, the
// namespace relabelled or the selector changed)
// is no longer guarded: the DaemonSet's guard (svclb-guard run,
// Options.RestoreUnchosen) writes kube-proxy's elements back as they were
// (see Putting back). The one-shot and watch commands do not; what they
// cut stays cut until kube-proxy's next full sync restores it. To force
// one, restart the node's kube-proxy pod (kubectl -n kube-system delete pod
// -l k8s-app=kube-proxy --field-selector spec.nodeName=NODE).
//
// # What is cut
//
// Only in table ip kube-proxy, and only a chosen Service's ClusterIP entry
// points: the elements of service-ips and no-endpoint-services whose key
// ("ClusterIP . proto . port", matched against "ip daddr . meta l4proto .
// th dport") leads with one of its ClusterIPs, one per Service port; and of
// those only the ports the meshed path serves instead of kube-proxy: TCP
// ports other than 53 (contract.MeshServes, applied to the key's protocol
// and port fields). The capture in a meshed pod diverts TCP only, and lets
// TCP to port 53 through to kube-proxy (DNS reaches the resolver as over
// UDP); the agent serves TCP only. A UDP, SCTP or TCP/53 port of a chosen
// Service has no path but kube-proxy's, for meshed pods too: cut, it would
// be broken for everyone, and choosing kube-dns (or all of kube-system)
// would be a cluster-wide DNS outage. Those elements stay exactly as
// kube-proxy wrote them; /status lists their ports and why (kubeProxyPorts).
//
// kube-proxy (pkg/proxy/nftables/proxier.go, syncProxyRules)
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
// # How it is cut
//
// An element is cut by overwriting, not deleting it: in one transaction the
// guard deletes it and adds it back with the same key, the verdict continue
// and the comment CutCommentPrefix "|" kube-proxy's verdict "|" kube-proxy's
// comment, e.g.
//
//	10.96.100.100 . tcp . 80 comment "svclb-guard-cut|goto service-C642UMGT-default/demo/tcp/http|" : continue
//	10.96.135.185 . tcp . 5353 comment "svclb-guard-cut|goto reject-chain|default/empty:5353-53" : continue
//
// A vmap lookup whose verdict is continue goes on to the chain's next rule,
// as one that finds nothing does (nft_do_chain), so ClusterIP traffic meets
// kube-proxy's cluster-ips-check REJECT as if the element were gone. But
// the key stays: kube-proxy keeps its own record of the elements it wrote
// (nftElementStorage, pkg/proxy/nftables/proxier.go) and, when it later
// deletes the key (Service deleted, or the element moves between
// service-ips and no-endpoint-services as endpoints come and go), that
// delete succeeds. Had the guard deleted the element, kube-proxy's whole
// transaction would fail and every change on the node wait for its retry,
// up to 30 s. kube-proxy's partial syncs compare with its record only and
// never restore a cut element; its full syncs read "continue", want its own
// verdict, and delete and re-add the element: a restore, cut again.
//
// The comment says whose the element is and keeps what putting it back
// needs; it stays within nft's comment limit of 128 characters (so a
// listing of the table still loads with nft -f). A verdict and comment too
// long for it leave the bare CutCommentPrefix: cut all the same, but
// only kube-proxy's next full sync puts it back (logged at the cut).
//
// A pass (Reconcile) reads those elements and cuts the ones of chosen
// Services on kube-proxy's path. A transaction carries at most 64 messages
// (two per element; several Services each, a Service never split): the
// kernel acknowledges every one. DeleteNow runs passes until one succeeds.
//
// # The proxy cut
//
// svclb-guard run --cut=proxy (Options.Cut contract.GuardCutProxy) judges
// the meshed path alone, for a run whose other clients must keep kube-proxy
// (the upstream conformance specs, e2e/conformance): it writes nothing into
// kube-proxy's table and refuses only what the node proxy would hand to
// kube-proxy. The node proxy's passthrough cluster dials a destination it
// does not serve from the node's network namespace with SO_MARK
// contract.ProxyUpstreamMark (translate.PassthroughOriginalDst), so the
// guard's own table, ip svclb-guard (contract.GuardTable), holds
//
//	set proxy-cut-vips { type ipv4_addr . inet_service; elements = { 10.96.100.100 . 80, … } }
//	chain proxy-cut {
//		type filter hook output priority -120; policy accept;
//		meta mark 0x0000ae7e ct state new ip daddr . tcp dport @proxy-cut-vips counter reject with tcp reset comment "…"
//	}
//
// The set is every ClusterIP . port of the chosen Services' ports the
// meshed path takes over, as kube-proxy has them (its service-ips and
// no-endpoint-services elements, read as for an all cut). Priority -120
// runs after conntrack (-200) and before kube-proxy's output chains
// (filter-output-pre-dnat -110, nat-output -100, where its DNAT would
// rewrite the destination): a marked SYN to a cut VIP is reset there, the
// proxy sees ECONNREFUSED, and everything else, unmarked or to any other
// address, goes on to kube-proxy untouched (TestProxyCutV134,
// TestProxyCutWithRealKubeProxy). "ct state new" spares connections made
// before the cut, as kube-proxy's REJECT does. A pass writes the set's
// changes in one transaction, or the whole table in one when it is missing
// or not this shape; kube-proxy never touches it, so nothing is re-cut.
// Switching modes heals: a proxy-cut pass puts back (as in Putting back)
// every entry an all cut overwrote of a chosen Service, once the set
// refuses it; an all-cut pass with RestoreUnchosen deletes table ip
// svclb-guard. A guard deleted while in proxy mode leaves its table: remove
// it with `nft delete table ip svclb-guard` (or run the guard in all mode
// once).
//
// # Keeping them cut
//
// kube-proxy restores the elements on a full sync (start-up, node label
// changes, periodically). Guard.Run subscribes to nftables events (nft
// monitor) and runs a pass after any addition, so a restore is cut again
// within milliseconds; a periodic pass (Options.Resync) backs it up. When
// the kernel closes the subscription (ENOBUFS) it is renewed and a pass
// runs. The guard's own overwrite is an addition too: it triggers one more
// pass, which finds the element cut and writes nothing.
//
// # Putting back
//
// A pass puts back, as kube-proxy wrote them (its verdict and comment,
// delete and add in one transaction), the cut elements of a chosen
// Service's ports the meshed path leaves to kube-proxy: a guard that cut
// every protocol and port left them cut, and replacing it heals them.
//
// With Options.RestoreUnchosen, a pass also puts back the cut elements of
// every Service that is not chosen: one that lost its label, left a
// selected namespace, or did so while the guard was down. It does so only
// once SetServices has said which Services are chosen, so a restarted
// guard does not uncut everything before its watch has synced.
//
// # Status
//
// Guard.Handler serves /metrics (Prometheus, prefix svclb_guard_), /healthz
// and /status, the JSON form of Status (the DaemonSet listens on the node's
// loopback, port contract.GuardPort; read it in the guard's container:
// kubectl -n svclb-system exec <pod> -- /svclb-guard get /status):
//
//	{
//	  "node": "kind-worker",
//	  "table": "ip kube-proxy",
//	  "cut": "all",                         // all | proxy (the proxy cut)
//	  "proxyCut": {"table": "ip svclb-guard", "set": "proxy-cut-vips", "mark": "0xae7e", "resets": 3},  // with "cut": "proxy" only
//	  "namespaceSelector": {                // the DaemonSet's (WatchServicesByNamespace)
//	    "source": "agent-configmap",        // or "flag" (--namespace-selector)
//	    "selector": "svclb.dev/mesh=enabled",  // in effect; "" selects every namespace
//	    "agentSelector": "svclb.dev/mesh=enabled",  // the agent ConfigMap's, as the agent reads it
//	    "refused": {"value": "\"team in (a\"", "kept": "svclb.dev/mesh=enabled", "reason": "…"}  // a bad value, omitted otherwise
//	  },
//	  "tablePresent": true,
//	  "monitor": {"subscribed": true, "resubscriptions": 0},  // "lastError" once one happened
//	  "passes": 42,
//	  "lastPass": "2026-11-29T16:00:00Z",
//	  "lastPassError": "",                  // omitted when empty
//	  "services": [{
//	    "namespace": "default", "name": "demo",
//	    "guardedSince": "2026-11-29T15:59:00Z",
//	    "state": "clean",                   // unknown | on-path | clean
//	    "cut": "all",                       // all: cut for every client; proxy: for the node proxy only
//	    "cutPorts": ["tcp/80", "tcp/443"],  // ports the guard cuts: the meshed path takes them over
//	    "proxyCut": ["10.96.100.100 . 80"], // with "cut": "proxy": the set's elements refusing it to the node proxy
//	    "kubeProxyPorts": [                 // ports left on kube-proxy's path, and why
//	      {"port": "tcp/53", "reason": "tcp/53: DNS passes through the capture"},
//	      {"port": "udp/53", "reason": "udp: not served by the agent"}
//	    ],
//	    "remaining": [],                    // ClusterIP entries the last cut failed to cut
//	    "deleted": [                        // every ClusterIP entry cut, once each, as kube-proxy wrote it
//	      {"kind": "element", "name": "service-ips: 10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http"},
//	      {"kind": "element", "name": "service-ips: 10.96.100.100 . tcp . 443 : goto service-LE7AQETR-default/demo/tcp/https"}
//	    ],
//	    "deletions": 3,                     // cut transactions (the names predate the overwrite)
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
// "clean" means no ClusterIP entry of a port the meshed path takes over is
// left on kube-proxy's path: each is cut (verdict continue) or gone
// (kube-proxy's NodePort and external entries, and the ports in
// kubeProxyPorts, are not counted: they stay); "on-path" means the last cut
// failed and one is. In a proxy cut, "clean" means the guard's set refuses
// each of those entries to the node proxy ("deleted" stays empty: nothing of
// kube-proxy's is cut; "deletions" counts the set writes that added the
// Service's elements).
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
//	table.go     read: the ClusterIP entries of kube-proxy's table, on path or cut, grouped by Service (readTable)
//	element.go   read: which Service a verdict-map element belongs to; nft's notation
//	mapkey.go    read: a map key's ClusterIP, protocol and port; whether the meshed path takes the port over
//	names.go     read: kube-proxy's chain and comment names taken apart
//	cut.go       cut: the overwrite transactions, grouped up to maxOps messages
//	cutmark.go   cut: the guard's comment on a cut element (CutCommentPrefix)
//	restore.go   put back: the cut elements of ports left to kube-proxy, and of Services no longer chosen
//	record.go    record: per-Service state, metrics, re-deletion latency
//	status.go    Status and Handler (/status, /metrics, /healthz)
//	metrics.go   the Prometheus metrics
//	monitor.go   the nft event subscription that triggers passes
//	proxycut.go  the proxy cut (--cut=proxy): the guard's table ip svclb-guard, read and written
//	services.go  WatchServices: the labelled Services, from the apiserver
//	namespaces.go  WatchServicesByNamespace (svclb-guard run): and every Service of the namespaces the agent enrolls
//	selector.go  the namespace selector in effect: the agent's ConfigMap by the agent's rule, or --namespace-selector
//	list.go      List: the read-only listing behind `svclb-guard list` (ClusterIP entries, on path and cut)
package kubeproxyguard
