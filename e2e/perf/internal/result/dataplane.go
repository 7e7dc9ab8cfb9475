package result

import "github.com/aether-mesh/svclb/e2e/perf/internal/connload"

// DataplaneFile is what TestDataplane writes.
const DataplaneFile = "dataplane.json"

// The data-plane paths, by key: the same client node, the same backend.
const (
	PathWire      = "a" // a plain pod to the endpoint's pod IP
	PathKubeProxy = "b" // a plain pod to the ClusterIP: kube-proxy's DNAT
	PathPhase0    = "c" // a meshed pod, Phase 1 off: the node proxy, then kube-proxy
	PathPhase1    = "d" // a meshed pod, Phase 1 on: the node proxy to the endpoint
)

// GiB is the unit CPU per byte is stated in.
const GiB = 1 << 30

// DataPath is what one path cost.
type DataPath struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	// Client is the pod that dialled, To the address it dialled, Peer the
	// remote address the backend saw on a probe connection.
	Client string `json:"client"`
	To     string `json:"to"`
	Peer   string `json:"peer"`
	// Open is setup to first byte at a fixed rate; Closed new connections
	// per second at a fixed concurrency; Bulk1 and Bulk8 echoed throughput
	// with one and with eight streams.
	Open   connload.OpenResult   `json:"open"`
	Closed connload.ClosedResult `json:"closed"`
	Bulk1  connload.BulkResult   `json:"bulk1"`
	Bulk8  connload.BulkResult   `json:"bulk8"`
	// ProxyCPUOpen is the node proxy's CPU-seconds on the client's node over
	// the open loop, ProxyCPUBulk over both bulk runs (Dataplane.CPUSource).
	ProxyCPUOpen float64 `json:"proxyCPUOpen"`
	ProxyCPUBulk float64 `json:"proxyCPUBulk"`
	// OpenTCP is how much the client pod netns's watched TCP counters
	// (tcpstat.Watched) grew over the open loop: on (c) and (d) the node
	// proxy's listener and, on (d), its upstream live in that netns too.
	OpenTCP map[string]int64 `json:"openTCP,omitempty"`
	// OpenNodeBusy and OpenNodeSteal are the shares of all the clients'
	// node's CPU time over the open loop that were busy and that the
	// hypervisor stole (its /proc/stat: on kind, the whole machine's).
	OpenNodeBusy  float64 `json:"openNodeBusy,omitempty"`
	OpenNodeSteal float64 `json:"openNodeSteal,omitempty"`
}

// CPUPerKConn is the node proxy's CPU-seconds per 1,000 connections of the
// open loop (0 when none was made).
func (p DataPath) CPUPerKConn() float64 {
	n := p.Open.Latency.N + p.Open.Latency.Failed
	if n == 0 {
		return 0
	}
	return p.ProxyCPUOpen / float64(n) * 1000
}

// CPUPerGiB is the node proxy's CPU-seconds per GiB echoed in the bulk runs
// (each byte crossed the path both ways).
func (p DataPath) CPUPerGiB() float64 {
	b := p.Bulk1.Bytes + p.Bulk8.Bytes
	if b == 0 {
		return 0
	}
	return p.ProxyCPUBulk / (float64(b) / GiB)
}

// Dataplane is "what a connection costs": four paths side by side in one run.
type Dataplane struct {
	Header
	// Node is the clients' node, whose node proxy's CPU is read; the backend
	// runs on another.
	Node string `json:"node"`
	// CPUSource says what the CPU figures read.
	CPUSource string     `json:"cpuSource"`
	Paths     []DataPath `json:"paths"`
}

// Path is the path of key (nil when it was not measured).
func (d *Dataplane) Path(key string) *DataPath {
	for i := range d.Paths {
		if d.Paths[i].Key == key {
			return &d.Paths[i]
		}
	}
	return nil
}
