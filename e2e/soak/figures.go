package soak

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Figures are the proposal's soak figures and the run's own measurements.
type Figures struct {
	// Split is Phase 0's split per node over the judged load: connections
	// the capture listener sent to the Service-range chains (cap_svc, and
	// cap_passthrough_svc for default/kubernetes) and to the rest
	// (cap_passthrough).
	Split []SplitRow `json:"split"`
	// ClientSplit is the same split as the load clients counted it:
	// attempts to Service targets and to the direct pod target.
	ClientSplit SplitRow   `json:"clientSplit"`
	Snapshots   []Snapshot `json:"snapshots"`
	// FirstConn is the first-connection latency in on-demand mode.
	FirstConn     *Latency        `json:"firstConn,omitempty"`
	Redeletions   []Redeletion    `json:"redeletions,omitempty"`
	ProxyRestarts []ProxyRecovery `json:"proxyRestarts,omitempty"`
	NodeLosses    []NodeRecovery  `json:"nodeLosses,omitempty"`
	Growth        []Growth        `json:"growth"`
	// ProxyNC is each node proxy's NC count over the load (the capture
	// chains' downstream_cx_no_route); Refused sets it beside the NC
	// refusals the agents logged.
	ProxyNC map[string]int64 `json:"proxyNC,omitempty"`
	Refused []RefusedRow     `json:"refused,omitempty"`
	// Bounds are the figures with a bound; one not kept fails the run.
	Bounds []Bound `json:"bounds"`
}

// SplitRow counts connections by capture chain.
type SplitRow struct {
	Node           string `json:"node"`
	Svc            int64  `json:"svc"`
	PassthroughSvc int64  `json:"passthroughSvc"`
	Passthrough    int64  `json:"passthrough"`
}

// RefusedRow is one node's NC closes as its proxy counted them and as its
// agent logged them. The proxy's access log carries every NC close to the
// agent, which logs each as a refusal: fewer logged than counted means
// refusals lost between the two (or logged by an agent container since
// replaced and not read before it was).
type RefusedRow struct {
	Node     string `json:"node"`
	Proxy    int64  `json:"proxy"`
	Agent    int64  `json:"agent"`
	Unlogged int64  `json:"unlogged"`
}

// refusedRows compares each node's proxy NC count with the NC refusals its
// agent logged since the load started (the last ones reach the log after
// the load's end, when the proxy's access log is flushed).
func refusedRows(r *Record) []RefusedRow {
	logged := loggedNC(r.Refusals, r.LoadStart)
	var out []RefusedRow
	for _, n := range sortedKeys(r.Figures.ProxyNC) {
		row := RefusedRow{Node: n, Proxy: r.Figures.ProxyNC[n], Agent: logged[n]}
		row.Unlogged = max(row.Proxy-row.Agent, 0)
		out = append(out, row)
	}
	return out
}

// loggedNC counts each node's NC refusals logged since since: the proxy's
// NC closes (no cluster for the connection), as its agent logged them.
func loggedNC(refs []Refusal, since time.Time) map[string]int64 {
	logged := map[string]int64{}
	for _, ref := range refs {
		if ref.Flag == "NC" && !ref.Time.Before(since) {
			logged[ref.Node]++
		}
	}
	return logged
}

// ServiceShare is the part of the connections that went to the Service
// range.
func (s SplitRow) ServiceShare() float64 {
	all := s.Svc + s.PassthroughSvc + s.Passthrough
	if all == 0 {
		return 0
	}
	return float64(s.Svc+s.PassthroughSvc) / float64(all)
}

// Snapshot is the xDS a node's proxy held at one moment.
type Snapshot struct {
	When string `json:"when"`
	Node string `json:"node"`
	CDS  string `json:"cds"` // the agent's CDS mode then
	// Clusters are the dynamic clusters, SvcClusters those named svc:.
	Clusters    int `json:"clusters"`
	SvcClusters int `json:"svcClusters"`
	// CDSBytes and EDSBytes are the wire sizes of the dynamic clusters and
	// of their load assignments (proto.Size of each message).
	CDSBytes int `json:"cdsBytes"`
	EDSBytes int `json:"edsBytes"`
	// Demanded and Pending are the agent's on-demand counts then.
	Demanded int `json:"demanded"`
	Pending  int `json:"pending"`
}

// Latency is first connections against warm ones, in milliseconds.
type Latency struct {
	N        int     `json:"n"`
	Failed   int     `json:"failed"`
	FirstP50 float64 `json:"firstP50"`
	FirstP99 float64 `json:"firstP99"`
	WarmP50  float64 `json:"warmP50"`
	WarmP99  float64 `json:"warmP99"`
}

// Redeletion is the guard's re-deletion of one Service after one
// kube-proxy restart.
type Redeletion struct {
	Node    string `json:"node"`
	Service string `json:"service"`
	// Latency is the guard's own figure: from observing kube-proxy's
	// restore to committing the cut. AfterDelete is from the kube-proxy
	// pod's deletion to that commit.
	Latency     time.Duration `json:"latency"`
	AfterDelete time.Duration `json:"afterDelete"`
}

// ProxyRecovery is how one client target went through a proxy restart.
type ProxyRecovery struct {
	Client, Target string
	// FirstFail is when the first failed attempt started, Recovered when
	// the first success after it started; Failures counts those between.
	FirstFail, Recovered time.Time
	Failures             int
	// FirstAfter says whether the first attempt that started after the
	// window's end succeeded.
	FirstAfter string
	// MaxMillis is the longest attempt of the seconds the window spans:
	// a connection whose SYN the pod's kernel dropped while no listener
	// was bound (TPROXY finds no socket) is retried and succeeds late.
	MaxMillis float64
}

// Growth is one process's figure at the start and end of a run of it.
type Growth struct {
	Node, Proc, Metric string
	PID                int
	Baseline, End, Max float64
	Bound              float64
	OK                 bool
	Why                string
}

// Bound is one figure checked against its bound.
type Bound struct {
	What   string `json:"what"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Derived: Analyze derived it from the record (the leak checks, a
	// fault's own figures), so it derives it again; the rest were measured
	// during the run.
	Derived bool `json:"derived,omitempty"`
}

// SnapshotOf measures a /config_dump?include_eds.
func SnapshotOf(d *adminv3.ConfigDump) (Snapshot, error) {
	var s Snapshot
	var cd adminv3.ClustersConfigDump
	var ed adminv3.EndpointsConfigDump
	for _, a := range d.GetConfigs() {
		switch {
		case a.MessageIs(&cd):
			if err := a.UnmarshalTo(&cd); err != nil {
				return s, err
			}
		case a.MessageIs(&ed):
			if err := a.UnmarshalTo(&ed); err != nil {
				return s, err
			}
		}
	}
	for _, c := range cd.GetDynamicActiveClusters() {
		s.Clusters++
		s.CDSBytes += proto.Size(c.GetCluster())
	}
	states, err := proxy.ClusterStates(d)
	if err != nil {
		return s, err
	}
	for name, st := range states {
		if st != proxy.ClusterStatic && strings.HasPrefix(name, contract.ClusterPrefix) {
			s.SvcClusters++
		}
	}
	for _, e := range ed.GetDynamicEndpointConfigs() {
		s.EDSBytes += proto.Size(e.GetEndpointConfig())
	}
	return s, nil
}

// Percentile is the p-th percentile (nearest rank) of xs, 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// FirstConnLatency compares each address's first attempt with its second.
func FirstConnLatency(rs []echo.Result) *Latency {
	var first, warm []float64
	l := &Latency{}
	for _, r := range rs {
		if !r.OK {
			l.Failed++
			continue
		}
		if r.Attempt == 1 {
			first = append(first, r.Millis)
		} else {
			warm = append(warm, r.Millis)
		}
	}
	l.N = len(first)
	l.FirstP50, l.FirstP99 = Percentile(first, 50), Percentile(first, 99)
	l.WarmP50, l.WarmP99 = Percentile(warm, 50), Percentile(warm, 99)
	return l
}

// Leak bounds (docs/soak.md, "Leaks"): a process whose load is the same at
// the end as at the start must hold about the same.
const (
	// rssSlack is added to twice the baseline resident set: Go's collector
	// (GOGC=100) lets the heap grow to twice what is live before it
	// collects, and returns freed pages to the kernel lazily.
	rssSlack = 16 << 20
	// goroutineSlack: the agent's goroutines belong to informers and
	// streams, not to connections.
	goroutineSlack = 50
	// fdSlack: fds not held by an open proxied connection are listeners,
	// streams and connections being opened or closed at the instant of the
	// sample: the same at both ends of a run, give or take a handful.
	fdSlack = 32
	// settle and span: a process's baseline is the median of its samples
	// from settle after it first appears to settle+span, its end the
	// median of its last span.
	settle = 10 * time.Second
	span   = 20 * time.Second
)

// GrowthOf checks every process (node, agent or proxy, PID) that ran long
// enough for a baseline and an end against the leak bounds.
func GrowthOf(samples []Sample) []Growth {
	type key struct {
		node, proc string
		pid        int
	}
	groups := map[key][]Sample{}
	var order []key
	for _, s := range samples {
		for _, p := range []struct {
			name string
			proc Proc
		}{{"agent", s.Agent}, {"proxy", s.Proxy}} {
			if p.proc.PID == 0 {
				continue
			}
			k := key{s.Node, p.name, p.proc.PID}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], s)
		}
	}
	var out []Growth
	for _, k := range order {
		ss := groups[k]
		first, last := ss[0].Time, ss[len(ss)-1].Time
		if last.Sub(first) < settle+2*span {
			continue // too short a life to judge
		}
		get := func(s Sample) Proc {
			if k.proc == "agent" {
				return s.Agent
			}
			return s.Proxy
		}
		for _, m := range []struct {
			name  string
			val   func(Proc) float64
			bound func(base float64) float64
			why   string
		}{
			{"rss MiB", func(p Proc) float64 { return float64(p.RSS) / (1 << 20) }, func(b float64) float64 { return 2*b + rssSlack/(1<<20) },
				"2 × baseline + 16 MiB (GOGC=100 heap growth and lazy return of freed pages)"},
			{"fds", func(p Proc) float64 { return float64(p.FDs) }, nil, "reported: the proxy's include Go's splice pipes (see Proc.Sockets); its sockets are bounded net of open connections"},
			{"sockets net of open connections", func(p Proc) float64 { return float64(p.Sockets - 2*p.Upstreams) }, func(b float64) float64 { return b + fdSlack },
				"baseline + 32: socket fds less two per open upstream connection (it and its downstream); what remains is listeners, the xDS and access-log streams and connections being opened or closed"},
			{"goroutines", func(p Proc) float64 { return float64(p.Goroutines) }, func(b float64) float64 { return b + goroutineSlack },
				"baseline + 50 (informers and streams, not connections)"},
			{"threads", func(p Proc) float64 { return float64(p.Threads) }, nil, "not bounded: Go never ends idle threads"},
		} {
			if k.proc == "proxy" && m.name == "goroutines" {
				continue
			}
			if k.proc == "agent" && m.name == "sockets net of open connections" {
				continue
			}
			bound := m.bound
			if k.proc == "agent" && m.name == "fds" {
				bound = func(b float64) float64 { return b + fdSlack }
			}
			var base, end []float64
			mx := 0.0
			for _, s := range ss {
				v := m.val(get(s))
				mx = max(mx, v)
				switch d := s.Time.Sub(first); {
				case d >= settle && d < settle+span:
					base = append(base, v)
				case last.Sub(s.Time) < span:
					end = append(end, v)
				}
			}
			if len(base) == 0 || len(end) == 0 {
				continue
			}
			g := Growth{Node: k.node, Proc: k.proc, Metric: m.name, PID: k.pid, Baseline: Percentile(base, 50), End: Percentile(end, 50), Max: mx, OK: true, Why: m.why}
			if bound != nil {
				g.Bound = bound(g.Baseline)
				g.OK = g.End <= g.Bound
				if k.proc == "agent" && m.name == "fds" {
					g.Why = "baseline + 32 (the agent's fds are its streams and watches, not connections)"
				}
			}
			out = append(out, g)
		}
	}
	return out
}

// GrowthBounds turns the growth checks into bounds.
func GrowthBounds(gs []Growth) []Bound {
	var out []Bound
	for _, g := range gs {
		if g.Bound == 0 {
			continue
		}
		out = append(out, Bound{
			What:   fmt.Sprintf("%s %s on %s (pid %d)", g.Proc, g.Metric, g.Node, g.PID),
			OK:     g.OK,
			Detail: fmt.Sprintf("baseline %.1f, end %.1f, max %.1f; bound %.1f = %s", g.Baseline, g.End, g.Max, g.Bound, g.Why),
		})
	}
	return out
}

// Analyze derives the figures that come from the clients' events: the
// clients' own split, each proxy restart's recovery per client target, and
// the leak checks; then it judges the record.
func Analyze(r *Record) {
	f := &r.Figures
	f.ClientSplit = SplitRow{Node: "clients"}
	for _, c := range r.Clients {
		start := clientStart(c)
		for _, e := range c.Events {
			if e.Kind != echo.LoadSecond || e.Time.Before(start) || e.Time.After(r.LoadEnd) {
				continue
			}
			n := int64(e.OK)
			for _, k := range e.Failed {
				n += int64(k)
			}
			if e.Target == TargetDirect {
				f.ClientSplit.Passthrough += n
			} else {
				f.ClientSplit.Svc += n
			}
		}
	}
	// What Analyze derives it derives again: a record analyzed twice has
	// each figure and bound once.
	f.ProxyRestarts, f.NodeLosses = nil, nil
	bounds := slices.DeleteFunc(slices.Clone(f.Bounds), func(b Bound) bool { return b.Derived })
	var derived []Bound
	for _, w := range r.Windows {
		if a, ok := windowFault(w).(analyzer); ok {
			derived = append(derived, a.Analyze(r, w)...)
		}
	}
	f.Refused = refusedRows(r)
	f.Growth = GrowthOf(r.Samples)
	derived = append(derived, GrowthBounds(f.Growth)...)
	for i := range derived {
		derived[i].Derived = true
	}
	f.Bounds = append(bounds, derived...)
	r.Verdict = Judge(r)
}

// clientStart is when a client's load started.
func clientStart(c Client) time.Time {
	for _, e := range c.Events {
		if e.Kind == echo.LoadStart {
			return e.Time
		}
	}
	return time.Time{}
}

// proxyRecovery is target's way through proxy window w, seen by client c.
func proxyRecovery(c Client, target string, w Window) ProxyRecovery {
	p := ProxyRecovery{Client: c.Pod, Target: target, FirstAfter: "no attempt after the window"}
	for _, e := range c.Events {
		if e.Target != target {
			continue
		}
		switch e.Kind {
		case echo.LoadFail:
			if !e.End.Before(w.Start) && !e.Time.After(w.End) {
				if p.FirstFail.IsZero() {
					p.FirstFail = e.Time
				}
				p.Failures++
			}
		case echo.LoadRecover:
			if !p.FirstFail.IsZero() && p.Recovered.IsZero() && e.Time.After(p.FirstFail) {
				p.Recovered = e.Time
			}
		case echo.LoadSecond:
			if e.Second >= w.Start.Unix() && e.Second <= w.End.Unix() {
				p.MaxMillis = max(p.MaxMillis, e.MaxMillis)
			}
		}
	}
	// The first attempt that started after the window's end: a failure
	// would be a fail event after End; else the second after End that
	// counted a success.
	var firstFailAfter, firstOKSecond time.Time
	for _, e := range c.Events {
		if e.Target != target {
			continue
		}
		if e.Kind == echo.LoadFail && e.Time.After(w.End) && firstFailAfter.IsZero() {
			firstFailAfter = e.Time
		}
		if e.Kind == echo.LoadSecond && e.OK > 0 && e.Second > w.End.Unix() && firstOKSecond.IsZero() {
			firstOKSecond = time.Unix(e.Second, 0)
		}
	}
	switch {
	case !firstFailAfter.IsZero() && (firstOKSecond.IsZero() || firstFailAfter.Before(firstOKSecond)):
		p.FirstAfter = "failed (" + firstFailAfter.Format("15:04:05.000") + ")"
	case !firstOKSecond.IsZero():
		p.FirstAfter = "succeeded"
	}
	return p
}
