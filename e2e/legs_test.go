package e2e

import (
	"slices"
	"testing"
)

// legOrder is the order the legs run in: the suite's one list of them. The
// run records it (evidence order.json) and the report lists the legs in it;
// docs/legs.md follows it too. Adding a leg is its file and its line here:
// a leg defined but not listed, or listed but not defined, fails the
// package's init (leg.InOrder).
var legOrder = []string{
	"reach",
	"reach-after-resync",
	"refuse-no-endpoints",
	"refuse-port-not-declared",
	"refuse-no-service",
	"refuse-reset",
	"drain",
	"affinity",
	"itp-local",
	"topology",
	"passthrough",
	// Attribution and the Service lifecycle.
	"attribution",
	"attribution-source",
	"phase0-split",
	"named-port",
	"outlier",
	"retry",
	"retry-blackhole",
	"recreate",
	"new-service",
	// Control legs: what svclb leaves to kube-proxy.
	"apiserver",
	"dns",
	"own-node-port",
	// Hostile: what a pod or a careless operator can do (control legs too).
	"hostile-loop",
	"hostile-steer",
	"hostile-settings",
	"hostile-cut-dns",
	"hostile-status",
	// Disruptive last: range-grows adds and removes a ServiceCIDR (every
	// agent's Service range), on-demand restarts a node pod, enroll
	// redeploys the node DaemonSet with svclb-cni and restarts an agent.
	"range-grows",
	"on-demand",
	"enroll",
	// Last: hostile-scan fills a node's pending set and its proxy's subscriptions (it
	// restarts that node's pod after each run to empty them).
	"hostile-scan",
}

// TestLegOrder: the suite's legs are exactly legOrder's, in its order
// (leg.InOrder's own test covers every way the two can disagree).
func TestLegOrder(t *testing.T) {
	var names []string
	for _, l := range legs.Legs() {
		names = append(names, l.Name)
	}
	if !slices.Equal(names, legOrder) {
		t.Errorf("the suite's legs %v, want legOrder %v", names, legOrder)
	}
}
