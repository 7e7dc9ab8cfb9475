// Package xdsserver serves the agent's resources to the node proxy over go-control-plane's
// delta ADS and receives the proxy's access logs (gRPC ALS) on the same gRPC server: refusals,
// node-local refusals and connections.
//
// Caches: one LinearCache per type (CDS, EDS, LDS) behind a MuxCache. One agent serves one
// proxy, so per-node snapshots buy nothing, and a LinearCache takes per-resource updates:
// changing one Service touches two resources instead of re-hashing a 20k-resource snapshot,
// which is what keeps an EndpointSlice change → push in the low milliseconds at 10k Services.
//
// Refusals: an entry with UH whose destination is a known Service port counts as no-endpoints;
// an NC entry counts as what the index says of the destination: port-not-declared or
// no-service. An NC on a known Service port (the proxy asked before the agent published the
// cluster, e.g. just after a Phase 1 flip) counts as not-programmed, so it is never mistaken
// for a property of the Service.
//
// On-demand CDS: the names a delta CDS request subscribes or unsubscribes (the wildcard "*"
// aside) go to the DemandHandler; the agent decides what to publish. go-control-plane keeps a
// legacy wildcard subscription wildcard when names are added later, so an admitted cluster
// reaches the proxy through that subscription and a refused one simply never arrives. A name
// the handler does not keep is answered at once in removed_resources and go-control-plane keeps
// nothing of it (forget.go).
//
// Refusal lines (one per refused connection) are rate-limited per reason and source pod and in
// all; the rest are counted and summarised (refusallog.go).
//
// Connections: each entry of the connection log (the one the proxy writes as a connection's
// upstream connects) counts in svclb_svc_connections_total under its source pod's workload
// (Sources, set by the agent) and its Service port, at most contract.MaxConnectionSeries label
// sets, the rest in one overflow series (connections.go).
package xdsserver
