package e2e

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// legOrder is the order the legs run in: the suite's one list of them. The
// run records it (evidence order.json) and the report lists the legs in it;
// docs/legs.md follows it too. Adding a leg is its file and its line here:
// a leg defined but not listed, or listed but not defined, fails the
// package's init (inLegOrder).
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

// inLegOrder returns the defined legs in the order of order. Every leg must
// be listed once and every name listed defined once: a leg left out would
// have no chosen place among the disruptive ones, and a name without a leg
// is a leg renamed or removed in one place only.
func inLegOrder(defined []registered, order []string) ([]registered, error) {
	byName := map[string]registered{}
	var errs []error
	for _, l := range defined {
		if _, dup := byName[l.name]; dup {
			errs = append(errs, fmt.Errorf("leg %q is defined twice", l.name))
		}
		byName[l.name] = l
		if !slices.Contains(order, l.name) {
			errs = append(errs, fmt.Errorf("leg %q (%s) is not in legOrder (legs_test.go)", l.name, l.file))
		}
	}
	out := make([]registered, 0, len(order))
	for i, name := range order {
		if slices.Contains(order[:i], name) {
			errs = append(errs, fmt.Errorf("legOrder lists %q twice", name))
			continue
		}
		l, ok := byName[name]
		if !ok {
			errs = append(errs, fmt.Errorf("legOrder lists %q, which no file defines (defineLeg)", name))
			continue
		}
		out = append(out, l)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// TestLegOrder: the suite's legs are exactly legOrder's, in its order, and
// inLegOrder refuses every way the two can disagree.
func TestLegOrder(t *testing.T) {
	var names []string
	for _, l := range legs {
		names = append(names, l.name)
	}
	if !slices.Equal(names, legOrder) {
		t.Errorf("the suite's legs %v, want legOrder %v", names, legOrder)
	}
	def := func(names ...string) []registered {
		var out []registered
		for _, n := range names {
			out = append(out, registered{name: n, file: n + "_test.go"})
		}
		return out
	}
	got, err := inLegOrder(def("b", "a", "c"), []string{"a", "b", "c"})
	if err != nil || len(got) != 3 || got[0].name != "a" || got[1].name != "b" || got[2].name != "c" {
		t.Fatalf("inLegOrder = %v, %v; want a, b, c", got, err)
	}
	for _, c := range []struct {
		name    string
		defined []registered
		order   []string
	}{
		{"defined, not listed", def("a", "b"), []string{"a"}},
		{"listed, not defined", def("a"), []string{"a", "b"}},
		{"defined twice", def("a", "a"), []string{"a"}},
		{"listed twice", def("a"), []string{"a", "a"}},
	} {
		if _, err := inLegOrder(c.defined, c.order); err == nil {
			t.Errorf("%s: inLegOrder accepted legs %v in order %v", c.name, c.defined, c.order)
		}
	}
}
