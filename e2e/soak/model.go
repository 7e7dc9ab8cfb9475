package soak

import (
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// Record is everything one soak run observed; soak.json is its JSON form and
// the reports are rendered from it alone.
type Record struct {
	Started time.Time `json:"started"`
	// LoadStart and LoadEnd bound the judged load: from the first client's
	// first event to the end of the schedule's tail.
	LoadStart time.Time `json:"loadStart"`
	LoadEnd   time.Time `json:"loadEnd"`
	Settings  Settings  `json:"settings"`
	Env       Env       `json:"env"`
	Clients   []Client  `json:"clients"`
	Windows   []Window  `json:"windows"`
	// Refusals are the refusal lines every agent logged during the windows
	// that read them (fixtures/agent RefusalLog).
	Refusals []Refusal       `json:"refusals"`
	Samples  []Sample        `json:"samples"`
	Figures  Figures         `json:"figures"`
	Phases   []Phase         `json:"phases"`
	Errors   []string        `json:"errors,omitempty"`
	Verdict  *Verdict        `json:"verdict,omitempty"`
	Sweeps   map[string]Scan `json:"sweeps,omitempty"`
}

// Settings are the run's knobs (e2e/soak/soak.mk's variables).
type Settings struct {
	Duration       time.Duration `json:"duration"`
	Faults         []string      `json:"faults"`
	Rate           float64       `json:"rate"`
	Long           int           `json:"long"`
	Timeout        time.Duration `json:"timeout"`
	Gap            time.Duration `json:"gap"`
	APIServerHold  time.Duration `json:"apiserverHold"`
	ScaleHold      time.Duration `json:"scaleHold"`
	NodeHold       time.Duration `json:"nodeHold"`
	SampleEvery    time.Duration `json:"sampleEvery"`
	ScanHosts      int           `json:"scanHosts"`
	ScanPorts      []uint16      `json:"scanPorts"`
	ScanParallel   int           `json:"scanParallel"`
	FirstConnCount int           `json:"firstConnCount"`
}

// Env says what ran.
type Env struct {
	Proxy             string   `json:"proxy"`
	KubernetesVersion string   `json:"kubernetesVersion"`
	Nodes             []string `json:"nodes"`
	Workers           []string `json:"workers"`
	// AgentConfigBefore is the agent ConfigMap's data the run found (and
	// restored).
	AgentConfigBefore map[string]string `json:"agentConfigBefore"`
	// NotReadyBefore are the kube-system and svclb-system pods that were
	// not Running and Ready when the run started: the end does not wait
	// for them.
	NotReadyBefore []string `json:"notReadyBefore,omitempty"`
	Namespace      string   `json:"namespace"`
	ServicePorts   int      `json:"servicePorts"`
	// NodeAccess is how the run read the nodes (fixtures/cluster NodeAccess: docker or
	// daemonset), NodeAccessWhy why (the setup's choice).
	NodeAccess    string `json:"nodeAccess,omitempty"`
	NodeAccessWhy string `json:"nodeAccessWhy,omitempty"`
}

// Client is one load client: a meshed pod on a worker, and every event its
// `svclb-echo load` printed.
type Client struct {
	Pod    string           `json:"pod"`
	Node   string           `json:"node"`
	PodIP  string           `json:"podIP"`
	Events []echo.LoadEvent `json:"events"`
}

// Window is one fault: from its first action (Start) to the signal that it
// is over (End).
type Window struct {
	Name  string    `json:"name"`
	Kind  string    `json:"kind"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Node is the node a fault hit (kube-proxy, agent, proxy restarts).
	Node string `json:"node,omitempty"`
	// Target is the load target a fault hit (rolling, scale, recreate).
	Target string `json:"target,omitempty"`
	// Pods are the backends the fault removed (rolling, scale): a
	// connection one of them answered may be cut by its shutdown.
	Pods []string `json:"pods,omitempty"`
	// Addrs are addresses the fault retired (recreate: the old ClusterIP).
	Addrs []string `json:"addrs,omitempty"`
	// Lost are the backends of each load target that ran on the node a
	// node loss stopped, when it stopped.
	Lost map[string][]string `json:"lost,omitempty"`
	// Drained is, per "<node> <target>", from when that node's proxy held
	// none of the target's lost endpoints that no pod of the target served
	// again (a node loss: a pod back at its old address is live).
	Drained map[string]time.Time `json:"drained,omitempty"`
	// Steps are the fault's own instants, in order.
	Steps []Step `json:"steps,omitempty"`
	// Notes are what the fault measured, one line each.
	Notes []string `json:"notes,omitempty"`
	Error string   `json:"error,omitempty"`
	// Skipped: the fault did not run (its note says why); the window is
	// empty.
	Skipped bool `json:"skipped,omitempty"`
}

// Step is one instant of a fault.
type Step struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

// Refusal is one refusal an agent logged.
type Refusal struct {
	Time        time.Time `json:"t"`
	Node        string    `json:"node"`
	Reason      string    `json:"reason"`
	Namespace   string    `json:"namespace,omitempty"`
	Service     string    `json:"service,omitempty"`
	Destination string    `json:"destination"`
	Source      string    `json:"source"`
	Flag        string    `json:"flag"`
}

// Sample is one reading of a node's agent and proxy processes.
type Sample struct {
	Time  time.Time `json:"t"`
	Node  string    `json:"node"`
	Agent Proc      `json:"agent"`
	Proxy Proc      `json:"proxy"`
}

// Proc is one process as /proc and, for the agent, its metrics show it.
type Proc struct {
	PID     int   `json:"pid,omitempty"`
	RSS     int64 `json:"rss,omitempty"` // bytes
	Threads int   `json:"threads,omitempty"`
	FDs     int   `json:"fds,omitempty"`
	// Sockets are the fds that are sockets. The rest of a Go proxy's fds
	// are mostly pipes: io.Copy between two TCP connections splices
	// through a pipe from a pool the runtime empties only when it collects
	// garbage, so their number follows the peak of concurrent copies.
	Sockets int `json:"sockets,omitempty"`
	// Goroutines: the agent's go_goroutines (the proxy's admin is Envoy's,
	// which has no such figure; its threads stand in).
	Goroutines int `json:"goroutines,omitempty"`
	// Upstreams: the proxy's open upstream connections (the sum of its
	// clusters' upstream_cx_active, Envoy's stat); each proxied connection
	// holds two fds, this one and its downstream.
	Upstreams int `json:"upstreams,omitempty"`
}

// Phase is a timed part of the run, for the report.
type Phase struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took"`
}

// Scan is what a sweep (the range scan or the first-connection probe) saw.
type Scan struct {
	Node    string        `json:"node"`
	Pod     string        `json:"pod"`
	Results []echo.Result `json:"results"`
}
