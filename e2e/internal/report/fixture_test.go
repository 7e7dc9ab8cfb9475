package report

import (
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/fixtures/evidence"
)

// sample is a small evidence set built in code: one passing leg (reach)
// and one that proves nothing (drain).
func sample() *evidence.Set {
	red := &evidence.Run{Mode: evidence.Red, MetRed: true, Summary: "0/10 replies, 10 ECONNREFUSED",
		Attempts: 10, HostRefused: 10, Duration: 2 * time.Second}
	green := &evidence.Run{Mode: evidence.Green, MetGreen: true, Summary: "10/10 replies", Attempts: 10, Replies: 10,
		Backends: map[string]int{"echo-1@w1/zone-a": 6, "echo-2@w2/zone-b": 4},
		Counters: map[string]float64{`svclb_svc_refused_total{reason="no-endpoints"}`: 0}, Duration: 3 * time.Second}
	v, why := evidence.Judge(red, green)
	drainGreen := &evidence.Run{Mode: evidence.Green, MetGreen: true, Timeline: []evidence.Sample{
		{At: 0, Stage: "1 ready", Backend: "a", BackendState: "ready", Outcome: "reply"},
		{At: time.Second, Stage: "0 ready", Backend: "b<script>", BackendState: "terminating", Outcome: "reply"},
	}}
	return &evidence.Set{
		Order: runOrder,
		Env: &evidence.Env{Proxy: "builtin", KubernetesVersion: "v1.34.4", KindVersion: "v0.33.0", EnvoyVersion: "n/a",
			Nodes: []evidence.Node{{Name: "svclb-worker", Zone: "zone-a"}}},
		Legs: []*evidence.Leg{
			{Name: "reach", Red: red, Green: green, Verdict: v, Reason: why, Duration: 5 * time.Second, Setup: "s", GreenMeans: "g", RedExpect: "r"},
			{Name: "drain", Red: &evidence.Run{Mode: evidence.Red, MetGreen: true, Summary: "a|b"}, Green: drainGreen,
				Verdict: evidence.ProvesNothing, Reason: "green with the agent off"},
		},
		Phases:      []evidence.Phase{{Name: "cluster create", Seconds: 60}, {Name: "total", Seconds: 300}},
		Programming: &evidence.Programming{Changes: 5, Agent: evidence.Quantiles{Metric: "svclb_network_programming_duration_seconds", Count: 5, P50: 0.05, P99: 0.2}},
	}
}

// runOrder is the order of the legs as a run of the suite records it
// (order.json), for the runs built here.
var runOrder = []string{"reach", "refuse-no-endpoints", "drain", "affinity", "topology", "passthrough", "enroll"}

// ginkgoRun is a Ginkgo report of a run with label filter filter: one leg
// spec per name in states (a leg absent from states is not in the suite),
// in runOrder, as Ginkgo records it, filtered specs included as skipped.
func ginkgoRun(filter string, states map[string]types.SpecState) []types.Report {
	r := types.Report{SuiteConfig: types.SuiteConfig{LabelFilter: filter}}
	for _, name := range runOrder {
		if st, ok := states[name]; ok {
			r.SpecReports = append(r.SpecReports, legSpec(name, st, ""))
		}
	}
	return []types.Report{r}
}

func legSpec(name string, st types.SpecState, msg string) types.SpecReport {
	return types.SpecReport{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"leg " + name},
		ContainerHierarchyLabels: [][]string{{name}}, LeafNodeText: "is red with the agent's Phase flags off and green with them on",
		State: st, Failure: types.Failure{Message: msg}}
}

// run is a leg's run as measure leaves it.
func run(mode evidence.Mode, metRed, metGreen bool) *evidence.Run {
	return &evidence.Run{Mode: mode, MetRed: metRed, MetGreen: metGreen, Summary: string(mode) + " summary", Attempts: 1, Replies: 1}
}

// leg records a leg judged by evidence.Judge, or with verdict v when it is
// set (a control leg: the suite judges those itself).
func leg(name string, red, green *evidence.Run, v evidence.Verdict) *evidence.Leg {
	l := &evidence.Leg{Name: name, Red: red, Green: green, Verdict: v, Reason: "as given"}
	if v == "" {
		l.Verdict, l.Reason = evidence.Judge(red, green)
	}
	return l
}
