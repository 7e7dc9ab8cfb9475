package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// legs are the suite's legs, declared with leg.Define in their files and
// put into the tree in legOrder by init. Their runs read the cluster and
// the evidence directory that TestMain's setup leaves in suite.
var legs = leg.NewSuite(func() leg.Config {
	return leg.Config{Cluster: suite.cluster, Evidence: suite.evidence, Progress: progress}
})

// init puts the legs into the tree in legOrder (legs_test.go), each with a
// place no random seed changes (leg.Suite.Order). Legs that disturb the
// cluster (reach-after-resync restarts a kube-proxy, on-demand a node pod)
// cannot land inside another leg's run, and each waits until what it
// disturbed is back before it ends. The programming figure, with no
// priority, runs after every leg. Package variables are initialized before
// any init function, so every leg.Define has run by now. A leg legOrder
// does not list, or a name it lists that no file defines, panics here: the
// suite cannot start with either.
func init() {
	if err := legs.Order(legOrder); err != nil {
		panic("e2e: the legs and legOrder disagree:\n" + err.Error())
	}
}

// beforeNodeRestart is what a leg calls right before it restarts the node
// DaemonSet's pod on node: the probe banks that node's counters, which the
// new pod's proxy and agent start again from 0.
func beforeNodeRestart(ctx context.Context, node string) error {
	return legs.BeforeNodeRestart(ctx, node)
}

// phases is both Phase flags of the agent's ConfigMap, on or off.
func phases(on bool) map[string]string { return leg.Phases(on) }

// setAgentConfig sets keys of the agent's ConfigMap and waits until every
// node's agent applied them.
func setAgentConfig(ctx context.Context, want map[string]string) error {
	return leg.SetAgentConfig(ctx, leg.Config{Cluster: suite.cluster, Progress: progress}, want)
}

// allSucceed is the chance of a leg whose every attempt must succeed.
var allSucceed = fmt.Sprintf("nothing statistical: every attempt must succeed, each within %s (workload.AttemptTimeout: "+
	"milliseconds through the proxy; the bound keeps an attempt a loaded 2-core machine stalled, path intact, a success)", workload.AttemptTimeout)

// refuseLeg makes l a refusal leg: l's prepare finds what to dial, and the
// measure (measure.Refusal) expects the proxy to refuse every attempt with
// reason; the target is declared with reason for the evidence. l names the
// leg and gives its setup, workloads and exercises (and early); refuseLeg
// sets what every refusal leg shares.
func refuseLeg(reason string, l leg.Leg[measure.Target]) leg.Leg[measure.Target] {
	prepare := l.Prepare
	l.RedExpect = measure.RedExpect
	l.GreenMeans = measure.GreenMeans(reason)
	l.Chance = measure.RefusalChance
	l.Prepare = func(ctx context.Context) (measure.Target, error) {
		t, err := prepare(ctx)
		t.Reason = reason
		return t, err
	}
	l.Measure = func(ctx context.Context, t measure.Target, run *evidence.Run) {
		measure.Refusal(ctx, suite.cluster, suite.clients, t, run)
	}
	l.Services = func(t measure.Target) []measure.Dialled { return []measure.Dialled{t.Dialled()} }
	return l
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// sanitize makes a spec's text a directory name.
func sanitize(s string) string {
	s = strings.Trim(unsafe.ReplaceAllString(s, "-"), "-")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
