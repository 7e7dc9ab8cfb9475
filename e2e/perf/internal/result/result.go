package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Files each measurement writes into the artifacts directory; Load reads
// whichever exist.
const (
	EndpointChangeFile = "endpoint-change.json"
	NewServiceFile     = "new-service.json"
	scalePattern       = "scale-%d.json"
)

// ScaleFile is the file of the measurement at size Services.
func ScaleFile(services int) string { return fmt.Sprintf(scalePattern, services) }

// Pair is one figure measured on both paths in the same run: the agent
// (a guarded Service, a meshed client) and kube-proxy (its unguarded twin, a
// client that is not meshed, on the same node).
type Pair struct {
	Agent Dist `json:"agent"`
	// KubeProxy leaves out the changes during which kube-proxy's nftables
	// sync failed on the client's node (it then retries only after its
	// syncPeriod, 30 s): the guard, cutting the twin's Service, deletes
	// objects kube-proxy's next partial sync still names. KubeProxyAll has
	// every change.
	KubeProxy    Dist `json:"kubeProxy"`
	KubeProxyAll Dist `json:"kubeProxyAll"`
}

// NewPair makes a Pair from the agent's samples and kube-proxy's, failed
// telling which of kube-proxy's came with a failed sync.
func NewPair(agent, kubeProxy []float64, failed []bool) Pair {
	var clean []float64
	for i, v := range kubeProxy {
		if i >= len(failed) || !failed[i] {
			clean = append(clean, v)
		}
	}
	return Pair{Agent: NewDist(agent), KubeProxy: NewDist(clean), KubeProxyAll: NewDist(kubeProxy)}
}

// Ratio is agent / kube-proxy at one quantile.
type Ratio struct {
	// V is the ratio; 0 when it is not defined (kube-proxy's quantile is not
	// positive).
	V float64
	// AtMost: the agent's quantile was at or below the resolution, so V is
	// the resolution over kube-proxy's quantile, a bound. A quantile below
	// zero says the agent moved traffic before the clock's event reached the
	// test (its watch can deliver after the agent's): a ratio of it would be
	// negative and mean nothing, so the raw value is shown beside it instead.
	AtMost bool
}

func (r Ratio) String() string {
	switch {
	case r.V <= 0:
		return "–"
	case r.AtMost:
		return fmt.Sprintf("≤ %.3f", r.V)
	}
	return fmt.Sprintf("%.3f", r.V)
}

// Ratios are agent / kube-proxy at p50, p90 and p99, an agent quantile at
// or below resolution counted as resolution (Ratio.AtMost).
func (p Pair) Ratios(resolution time.Duration) [3]Ratio {
	res := float64(resolution.Microseconds()) / 1000
	one := func(a, k float64) Ratio {
		if k <= 0 {
			return Ratio{}
		}
		if a <= res {
			return Ratio{V: res / k, AtMost: true}
		}
		return Ratio{V: a / k}
	}
	return [3]Ratio{one(p.Agent.P50, p.KubeProxy.P50), one(p.Agent.P90, p.KubeProxy.P90), one(p.Agent.P99, p.KubeProxy.P99)}
}

// Header is what every measurement records about itself.
type Header struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	// LoadBefore and LoadAfter are the machine's load averages around the
	// measurement (the machine may be shared: every figure carries them).
	LoadBefore Load     `json:"loadBefore"`
	LoadAfter  Load     `json:"loadAfter"`
	Proxy      string   `json:"proxy"` // the node proxy: builtin or envoy
	Notes      []string `json:"notes,omitempty"`
}

// Change is one endpoint change as both paths saw it.
type Change struct {
	Kind string `json:"kind"` // "ready" or "gone"
	// Event is when the test saw the EndpointSlice change of each path's
	// Service; Agent and KubeProxy are milliseconds from it to the first
	// (ready) or last (gone) reply from the endpoint on that path.
	EventAgent     time.Time `json:"eventAgent"`
	EventKubeProxy time.Time `json:"eventKubeProxy"`
	Agent          float64   `json:"agentMs"`
	KubeProxy      float64   `json:"kubeProxyMs"`
	// Flipped is just before the test's API write of the readiness gate:
	// a clock that precedes both paths' programming by construction.
	// AgentFromFlip and KubeProxyFromFlip are milliseconds from it.
	Flipped           time.Time `json:"flipped"`
	AgentFromFlip     float64   `json:"agentFromFlipMs"`
	KubeProxyFromFlip float64   `json:"kubeProxyFromFlipMs"`
	// KubeProxySyncFailed: kube-proxy's nftables sync failed on the
	// client's node during the change (see Pair.KubeProxy).
	KubeProxySyncFailed bool `json:"kubeProxySyncFailed,omitempty"`
}

// EndpointChange is "endpoint change → traffic moves" at one size.
type EndpointChange struct {
	Header
	// Services is how many other Services the cluster held (0: the base run).
	Services int `json:"services"`
	// Interval is the clients' spacing of attempt starts: the resolution.
	Interval time.Duration `json:"interval"`
	Ready    Pair          `json:"ready"`
	Gone     Pair          `json:"gone"`
	// ReadyFromFlip and GoneFromFlip are the same changes timed from the
	// gate's API write (Change.Flipped): never negative, but both paths
	// carry the kubelet's and the EndpointSlice controller's part, so the
	// ratio is higher than the paths' own one (a bound on it).
	ReadyFromFlip Pair `json:"readyFromFlip"`
	GoneFromFlip  Pair `json:"goneFromFlip"`
	// EventAfterFlip is the shared part as the test saw it: from the API
	// write to the test's event for the agent's Service.
	EventAfterFlip Dist     `json:"eventAfterFlip"`
	Changes        []Change `json:"changes"`
}

// NewService is "new Service → first success".
type NewService struct {
	Header
	Interval time.Duration `json:"interval"`
	// FromSlice is measured from each Service's first EndpointSlice event
	// with a ready endpoint, FromCreate from the return of its Create call.
	FromSlice  Pair `json:"fromSlice"`
	FromCreate Pair `json:"fromCreate"`
}

// Side is one program's cost on one node.
type Side struct {
	// Programmed is the time from the first object's creation until it had
	// programmed every Service (0: it did not within the bound).
	Programmed time.Duration `json:"programmed"`
	// CPUSeconds is its container's CPU (cgroup cpu.stat usage_usec) over the
	// same window; RSS and HWM its process's VmRSS and VmHWM after it.
	CPUSeconds float64 `json:"cpuSeconds"`
	RSS        uint64  `json:"rss"`
	HWM        uint64  `json:"hwm"`
}

// NodeScale is one node's figures at a size.
type NodeScale struct {
	Node      string `json:"node"`
	Agent     Side   `json:"agent"`
	KubeProxy Side   `json:"kubeProxy"`
	// NodeProxy is the data plane the agent feeds (kube-proxy's is the
	// kernel's nftables, in no process): shown, not compared.
	NodeProxy Side `json:"nodeProxy"`
	// Restart: the same programs restarted with every object present (a node
	// joining), time and CPU from the new container's start.
	AgentRestart     *Side `json:"agentRestart,omitempty"`
	KubeProxyRestart *Side `json:"kubeProxyRestart,omitempty"`
	// Snapshot sizes: the node proxy's /config_dump?include_eds in bytes,
	// proactive CDS and on-demand CDS (only what this node's pods dialled).
	ProactiveBytes int `json:"proactiveBytes"`
	OnDemandBytes  int `json:"onDemandBytes"`
}

// Scale is the measurement at one size.
type Scale struct {
	Header
	Services     int             `json:"services"`
	EndpointsPer int             `json:"endpointsPer"`
	Created      time.Duration   `json:"created"` // creating every object took
	Nodes        []NodeScale     `json:"nodes"`
	Latency      *EndpointChange `json:"latency,omitempty"`
	// Broke says where it stopped when the size did not fit.
	Broke string `json:"broke,omitempty"`
}

// Write writes v as indented JSON to dir/name.
func Write(dir, name string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}

// Results are every measurement found in an artifacts directory.
type Results struct {
	EndpointChange *EndpointChange
	NewService     *NewService
	Scale          []*Scale // by size
	Dataplane      *Dataplane
}

// Read loads the measurements in dir; missing ones stay nil.
func Read(dir string) (*Results, error) {
	r := &Results{}
	if err := readOpt(dir, EndpointChangeFile, &r.EndpointChange); err != nil {
		return nil, err
	}
	if err := readOpt(dir, NewServiceFile, &r.NewService); err != nil {
		return nil, err
	}
	if err := readOpt(dir, DataplaneFile, &r.Dataplane); err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(dir, "scale-*.json"))
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		var s *Scale
		if err := readOpt(dir, filepath.Base(n), &s); err != nil {
			return nil, err
		}
		r.Scale = append(r.Scale, s)
	}
	sortScale(r.Scale)
	return r, nil
}

func readOpt[T any](dir, name string, v **T) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	*v = new(T)
	if err := json.Unmarshal(b, *v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
