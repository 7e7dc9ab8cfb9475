package scaleresult

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OnDemandFile is the file TestOnDemand writes into the perf results directory (beside
// GrowthFile), rewritten after every level.
const OnDemandFile = "ondemand.json"

// OnDemand is "on-demand first-connection latency": one run of TestOnDemand, the agent in
// on-demand CDS mode with some Services already demanded, and first connections from a
// captured pod to Services not yet demanded, beside connections to demanded ones.
type OnDemand struct {
	RunInfo
	// Services is how many exist in all (each with Endpoints echo servers); Conns the
	// connections of each kind at each level, at Rate per second (open loop), each bounded by
	// Timeout.
	Services  int             `json:"services"`
	Endpoints int             `json:"endpoints"`
	Conns     int             `json:"conns"`
	Rate      float64         `json:"rate"`
	Timeout   time.Duration   `json:"timeout"`
	Levels    []OnDemandLevel `json:"levels"`
}

// OnDemandLevel is the figures with Demanded Services already demanded when the agent and the
// node proxy started.
type OnDemandLevel struct {
	Demanded int `json:"demanded"`
	// Ready is from the agent's start until the proxy held every demanded cluster warm.
	Ready time.Duration `json:"ready"`
	// First is setup to first byte of each connection to a Service not yet demanded (each
	// its own); Known the same to Services already demanded. Both from when each was due.
	First       Percentiles `json:"first"`
	FirstErrors int         `json:"firstErrors"`
	Known       Percentiles `json:"known"`
	KnownErrors int         `json:"knownErrors"`
	// Attempts is the proxy's tcp.cap_svc.on_demand_cluster_attempt over the first
	// connections: how many waited for a discovery (each should).
	Attempts int64 `json:"attempts"`
	// Pushes and PushSeconds are the agent's pushes during the first connections and their
	// total duration (its push-duration histogram): each admission is a rebuild.
	Pushes       uint64   `json:"pushes"`
	PushSeconds  float64  `json:"pushSeconds"`
	ErrorSamples []string `json:"errorSamples,omitempty"`
	// Agent and NodeProxy are resident memory after the level; DemandedAfter the agent's
	// /status demanded then.
	Agent         Memory     `json:"agent"`
	NodeProxy     Memory     `json:"nodeProxy"`
	DemandedAfter int        `json:"demandedAfter"`
	LoadAfter     [3]float64 `json:"loadAfter"`
	// NodeProxyCPUProfile is the node proxy's CPU profile over the first connections, a file
	// beside OnDemandFile (SVCLB_SCALE_PROFILE=1).
	NodeProxyCPUProfile string `json:"nodeProxyCPUProfile,omitempty"`
}

// Table renders the levels as the test logs them: latencies in ms, first/known ratios of the
// p50 and p99, the agent's pushes and their mean, memory in MiB.
func (o *OnDemand) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %8s %9s %9s %9s %6s %9s %9s %6s %8s %8s %8s %7s %11s %9s %9s %6s\n", "demanded", "ready", "first p50", "first p99",
		"first max", "errors", "known p50", "known p99", "errors", "p50 f/k", "p99 f/k", "attempts", "pushes", "push ms avg", "agent MiB",
		"proxy MiB", "load1")
	for _, l := range o.Levels {
		avg := "–"
		if l.Pushes > 0 {
			avg = strconv.FormatFloat(l.PushSeconds*1000/float64(l.Pushes), 'f', 1, 64)
		}
		fmt.Fprintf(&b, "%8d %8s %9s %9s %9s %6d %9s %9s %6d %8s %8s %8d %7d %11s %9s %9s %6.2f\n", l.Demanded, l.Ready.Round(100*time.Millisecond),
			ms(l.First.P50), ms(l.First.P99), ms(l.First.Max), l.FirstErrors, ms(l.Known.P50), ms(l.Known.P99), l.KnownErrors,
			durRatio(l.First.P50, l.Known.P50), durRatio(l.First.P99, l.Known.P99), l.Attempts, l.Pushes, avg, MiB(l.Agent.RSS),
			MiB(l.NodeProxy.RSS), l.LoadAfter[0])
	}
	return b.String()
}

// Write writes o as indented JSON to dir/OnDemandFile.
func (o *OnDemand) Write(dir string) error { return writeResult(dir, OnDemandFile, o) }
