package scaleresult

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// GrowthFile is the file TestGrowth writes into the perf results directory, rewritten after
// every step so that a run cut short keeps the steps it finished.
const GrowthFile = "growth.json"

// Growth is "how cost grows": one run of TestGrowth, the agent, the node proxy it feeds and
// kube-proxy running while the Services are created step by step, measured after each step.
type Growth struct {
	RunInfo
	// EndpointsPer is each Service's ready endpoints (one EndpointSlice); Workers the
	// parallel creators.
	EndpointsPer int `json:"endpointsPer"`
	Workers      int `json:"workers"`
	// Poll is how often the node proxy's /stats is read while waiting: the push time's
	// resolution and its floor. KubeProxyPoll is the same for kube-proxy's nftables.
	Poll          time.Duration `json:"poll"`
	KubeProxyPoll time.Duration `json:"kubeProxyPoll"`
	Steps         []GrowthStep  `json:"steps"`
}

// GrowthStep is the figures once the cluster holds Services Services.
type GrowthStep struct {
	Services int `json:"services"`
	// Created is how long creating this step's new Services and EndpointSlices took.
	Created time.Duration `json:"created"`
	// Push is from the return of the step's last Create until the node proxy held a cluster
	// for every Service with none warming (at Growth.Poll); KubeProxy the same until
	// kube-proxy's nftables held every Service and endpoint (at Growth.KubeProxyPoll; 0 if
	// it did not within the bound).
	Push      time.Duration `json:"push"`
	KubeProxy time.Duration `json:"kubeProxy"`
	// Pushes and PushSeconds are the agent's own account of the step (the count and sum of
	// its push-duration histogram, from before the step's first Create to after Push and the
	// settle): how many rebuilds it handed to its xDS server, and their total duration.
	Pushes      uint64  `json:"pushes"`
	PushSeconds float64 `json:"pushSeconds"`
	// Resident memory after the step (and a settle), and CPU used during it.
	Agent         ProcCost   `json:"agent"`
	NodeProxy     ProcCost   `json:"nodeProxy"`
	KubeProxyCost ProcCost   `json:"kubeProxyCost"`
	LoadAfter     [3]float64 `json:"loadAfter"`
	NodeProxyHeap string     `json:"nodeProxyHeap,omitempty"` // a heap profile's file, beside GrowthFile
	// AgentHeapInuse is the agent's Go heap in use after the step (its go_memstats metric; the
	// agent serves no pprof).
	AgentHeapInuse uint64 `json:"agentHeapInuse"`
	AgentClusters  int    `json:"agentClusters"` // the agent's /status, for the record
	AgentEndpoints int    `json:"agentEndpoints"`
}

// ProcCost is one process's cost at a step.
type ProcCost struct {
	Memory
	CPUSeconds float64 `json:"cpuSeconds"` // utime+stime (+ reaped children's) during the step
}

// Table renders the steps as the test logs them: one row per step, memory in MiB (VmRSS, and the
// agent's Go heap in use), the ratios against kube-proxy's VmRSS.
func (g *Growth) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %8s %9s %7s %8s %9s %10s %9s %9s %8s %10s %9s %6s\n", "services", "created", "push", "pushes", "push s",
		"agent MiB", "agent heap", "proxy MiB", "k-p MiB", "agent/kp", "(a+p)/kp", "k-p prog", "load1")
	for _, s := range g.Steps {
		kp := "–"
		if s.KubeProxy > 0 {
			kp = s.KubeProxy.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%8d %8s %9s %7d %8.3f %9s %10s %9s %9s %8s %10s %9s %6.2f\n", s.Services, s.Created.Round(time.Second),
			s.Push.Round(10*time.Millisecond), s.Pushes, s.PushSeconds, MiB(s.Agent.RSS), MiB(s.AgentHeapInuse), MiB(s.NodeProxy.RSS),
			MiB(s.KubeProxyCost.RSS),
			ratioText(s.Agent.RSS, s.KubeProxyCost.RSS), ratioText(s.Agent.RSS+s.NodeProxy.RSS, s.KubeProxyCost.RSS), kp, s.LoadAfter[0])
	}
	return b.String()
}

// ratioText is a/b with three decimals, "–" when b is 0.
func ratioText(a, b uint64) string {
	if b == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 3, 64)
}

// Write writes g as indented JSON to dir/GrowthFile.
func (g *Growth) Write(dir string) error { return writeResult(dir, GrowthFile, g) }
