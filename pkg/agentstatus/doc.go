// Package agentstatus is the agent's /status document: the types the agent encodes and the
// suites and fixtures decode, so that neither side copies them and a reader needs no part of
// the agent daemon. It holds types and constants only.
//
// The document, as the agent serves it on its HTTP port (package agent):
//
//	{
//	  "node": "kind-worker", "zone": "zone-a",
//	  "nodeAddresses": ["172.18.0.3"],     // the Node's IPv4 addresses, refused by every listener
//	  "phase1": true, "phase2": true,      // the phases of the published snapshot
//	  "snapshotVersion": 12,               // bumps on every published change
//	  "clusters": 42, "endpoints": 97,     // clusters incl. passthrough_original_dst and blackhole
//	  "listeners": [{"pod": "client", "namespace": "default",
//	                 "netns": "/var/run/netns/cni-…", "name": "capture~default~client"}],
//	  "rangeKnown": true, "range": ["10.96.0.0/16"],
//	  "cds": "on-demand",                  // the CDS mode of the published snapshot
//	  "demanded": 3, "pending": 0,         // admitted on-demand names; refused names remembered
//	  "forgotten": 0,                      // addresses of refused names not remembered (pending full)
//	  "refusal": "close",                  // the refusal setting ("reset": in force with both phases)
//	  "refusedAtSyn": 0,                   // Service ports the pods' refuse tables reset
//	  "settingsErrors": [{"key": "phase1", "value": "\"off\"", "kept": "false",
//	                      "reason": "want \"true\" or \"false\""}]  // [] when the ConfigMap is good
//	}
//
// "enrollment" is added when the agent serves the CNI plugin (EnrollmentStatus).
package agentstatus
