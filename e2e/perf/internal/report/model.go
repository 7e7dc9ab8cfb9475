package report

import (
	"fmt"
	"slices"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
)

// Model is what both templates show.
type Model struct {
	Goals    []Goal
	Sections []Section
}

// Goal is one of the perf goals (docs/perf.md), as agent/kube-proxy in the same run.
type Goal struct {
	Name, Target, Measured, Verdict string
	Met                             bool
}

// Section is one measurement.
type Section struct {
	Title  string
	Intro  string
	Load   string // the machine's load around it
	Tables []render.Table
	Charts []Figure
	Notes  []string
}

// Figure is a chart and its caption (HTML only).
type Figure struct {
	Caption string
	Chart   *render.Chart
	// Whole: the caption says how to read the chart; without it the page
	// adds the endpoint-change CDFs' legend.
	Whole bool
}

// Build makes the model from the results found: the perf suite's, then the envtest scale
// tests' (a section each, whether or not they ran).
func Build(r *result.Results, e *scaleresult.Results) Model {
	var m Model
	m.Goals = append(goals(r), dataplaneGoals(r.Dataplane)...)
	if ec := r.EndpointChange; ec != nil {
		m.Sections = append(m.Sections, changeSection("Endpoint change → traffic moves", ec))
	}
	if ns := r.NewService; ns != nil {
		m.Sections = append(m.Sections, newServiceSection(ns))
	}
	if r.Dataplane != nil {
		m.Sections = append(m.Sections, dataplaneSection(r.Dataplane))
	}
	for _, s := range r.Scale {
		m.Sections = append(m.Sections, scaleSection(s))
		if s.Latency != nil {
			m.Sections = append(m.Sections, changeSection(fmt.Sprintf("Endpoint change at %d Services", s.Services), s.Latency))
		}
	}
	m.Sections = append(m.Sections, envtestSections(e)...)
	return m
}

func loadLine(h result.Header) string {
	return fmt.Sprintf("%s; started %s, took %s; before: %s; after: %s", proxyName(h.Proxy), h.Started.Format("2006-01-02 15:04:05 MST"),
		h.Duration.Round(time.Second), h.LoadBefore, h.LoadAfter)
}

func proxyName(p string) string {
	if p == "envoy" {
		return "node proxy Envoy"
	}
	return "node proxy: the built-in one (nodeproxy/)"
}

func distRow(kind, path string, d result.Dist) []string {
	return []string{kind, path, fmt.Sprint(d.N), ms(d.P50), ms(d.P90), ms(d.P99), ms(d.Min), ms(d.Max)}
}

func ratioRow(kind string, p result.Pair, resolution time.Duration) []string {
	r := p.Ratios(resolution)
	return []string{kind, "agent / kube-proxy", "", r[0].String(), r[1].String(), r[2].String(), "", ""}
}

var distHeader = []string{"change", "path", "n", "p50", "p90", "p99", "min", "max"}

func ms(v float64) string {
	s := fmt.Sprintf("%.0f ms", v)
	if s == "-0 ms" {
		return "0 ms"
	}
	return s
}

func ratio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", v)
}

func changeSection(title string, ec *result.EndpointChange) Section {
	s := Section{
		Title: title,
		Intro: fmt.Sprintf("A backend's readiness gate flipped %d times each way while both clients start an attempt every %s (resolution). "+
			"Ready: to the first reply from the backend; gone: to the last reply from it. "+
			"Clock of the first table (the goals'): the test's EndpointSlice watch event of each path's own Service; it can reach the test after the agent "+
			"acted, so values can be below zero, and a ratio of an agent quantile at or below the resolution is a bound (≤ resolution / kube-proxy's). "+
			"Clock of the second: just before the test's API write of the gate, which precedes both paths; both then carry the kubelet's and the "+
			"EndpointSlice controller's part, so its ratios are higher than the paths' own. Other Services on the cluster: %d.", ec.Ready.Agent.N, ec.Interval, ec.Services),
		Load: loadLine(ec.Header),
		Tables: []render.Table{{Caption: "from the slice event", Header: distHeader,
			Rows: slices.Concat(pairRows("ready", ec.Ready, ec.Interval), pairRows("gone", ec.Gone, ec.Interval))}},
		Charts: []Figure{
			{Caption: "a new endpoint becomes ready: time from the slice event to its first reply", Chart: cdfChart(pairSeries(ec.Ready)...)},
			{Caption: "an endpoint goes away: time from the slice event to its last reply", Chart: cdfChart(pairSeries(ec.Gone)...)},
		},
		Notes: ec.Notes,
	}
	if ec.ReadyFromFlip.Agent.N > 0 {
		s.Tables = append(s.Tables, render.Table{Caption: "from the gate's API write", Header: distHeader,
			Rows: slices.Concat(pairRows("ready", ec.ReadyFromFlip, ec.Interval), pairRows("gone", ec.GoneFromFlip, ec.Interval))})
		s.Charts = append(s.Charts,
			Figure{Caption: "ready: time from the gate's API write to the first reply", Chart: cdfChart(pairSeries(ec.ReadyFromFlip)...)},
			Figure{Caption: "gone: time from the gate's API write to the last reply", Chart: cdfChart(pairSeries(ec.GoneFromFlip)...)})
		d := ec.EventAfterFlip
		s.Notes = append(s.Notes, fmt.Sprintf("The shared part: from the gate's API write to the test's slice event for the agent's Service, p50 %s, p90 %s, max %s.",
			ms(d.P50), ms(d.P90), ms(d.Max)))
	}
	if spread := eventSpread(ec.Changes); spread != "" {
		s.Notes = append(s.Notes, spread)
	}
	return s
}

// eventSpread says how far apart the two Services' slice events were (the
// same selector: the EndpointSlice controller writes them one after the
// other).
func eventSpread(cs []result.Change) string {
	var d []float64
	for _, c := range cs {
		if !c.EventAgent.IsZero() && !c.EventKubeProxy.IsZero() {
			d = append(d, float64(c.EventKubeProxy.Sub(c.EventAgent).Microseconds())/1000)
		}
	}
	if len(d) == 0 {
		return ""
	}
	dist := result.NewDist(d)
	return fmt.Sprintf("The twin's EndpointSlice event came %s after the guarded Service's at the median (%s … %s): each path is timed from its own.",
		ms(dist.P50), ms(dist.Min), ms(dist.Max))
}

// pairRows are a pair's rows: the agent, kube-proxy, kube-proxy with the
// changes its failed syncs stalled (when there were any), the ratio.
func pairRows(kind string, p result.Pair, resolution time.Duration) [][]string {
	rows := [][]string{distRow(kind, "agent", p.Agent), distRow(kind, "kube-proxy", p.KubeProxy)}
	if n := p.KubeProxyAll.N - p.KubeProxy.N; n > 0 {
		rows = append(rows, distRow(kind, fmt.Sprintf("kube-proxy, with the %d its failed syncs stalled", n), p.KubeProxyAll))
	}
	return append(rows, ratioRow(kind, p, resolution))
}

func pairSeries(p result.Pair) []series {
	ss := []series{{name: "agent", color: colorAgent, samples: p.Agent.Samples}, {name: "kube-proxy", color: colorKubeProxy, samples: p.KubeProxy.Samples}}
	if p.KubeProxyAll.N > p.KubeProxy.N {
		ss = append(ss, series{name: "kube-proxy, all", color: colorKubeProxyAll, samples: p.KubeProxyAll.Samples})
	}
	return ss
}

func newServiceSection(ns *result.NewService) Section {
	return Section{
		Title: "New Service → first success",
		Intro: fmt.Sprintf("%d times, a Service (cut; meshed client) and its twin (kube-proxy; plain client) created at once at addresses the clients already dial, every %s. "+
			"From each Service's first EndpointSlice event with a ready endpoint, and from just before its Create call, to the first reply.", ns.FromSlice.Agent.N, ns.Interval),
		Load: loadLine(ns.Header),
		Tables: []render.Table{{Header: []string{"clock", "path", "n", "p50", "p90", "p99", "min", "max"},
			Rows: slices.Concat(pairRows("slice event", ns.FromSlice, ns.Interval), pairRows("Create", ns.FromCreate, ns.Interval))}},
		Charts: []Figure{{Caption: "new Service: time from the slice event to the first reply", Chart: cdfChart(pairSeries(ns.FromSlice)...)}},
		Notes:  ns.Notes,
	}
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func secs(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func scaleSection(s *result.Scale) Section {
	created := "created in " + s.Created.Round(time.Second).String()
	if s.Created == 0 {
		created = "not all created (below: where it stopped)"
	}
	sec := Section{
		Title: fmt.Sprintf("%d Services at once", s.Services),
		Intro: fmt.Sprintf("%d selector-less Services × %d endpoints (hand-made EndpointSlices), %s. Per node: time from the first creation until "+
			"kube-proxy's nftables (service-ips map) and the node proxy (its active clusters) hold every one; CPU of each container over that window "+
			"(cgroup counter; kube-proxy's includes its nft runs); VmRSS after it.",
			s.Services, s.EndpointsPer, created),
		Load:  loadLine(s.Header),
		Notes: s.Notes,
	}
	if s.Broke != "" {
		sec.Notes = append([]string{"Stopped: " + s.Broke}, sec.Notes...)
	}
	t := render.Table{Header: []string{"node", "programmed: agent", "kube-proxy", "CPU s: agent", "kube-proxy", "ratio", "VmRSS: agent", "kube-proxy", "ratio",
		"config dump: proactive", "on-demand"}}
	for _, n := range s.Nodes {
		if n.Agent.Programmed == 0 && n.KubeProxy.Programmed == 0 {
			continue // nothing measured on it (the size stopped first)
		}
		t.Rows = append(t.Rows, []string{n.Node, secs(n.Agent.Programmed), secs(n.KubeProxy.Programmed),
			fmt.Sprintf("%.2f", n.Agent.CPUSeconds), fmt.Sprintf("%.2f", n.KubeProxy.CPUSeconds), ratio(div(n.Agent.CPUSeconds, n.KubeProxy.CPUSeconds)),
			mib(n.Agent.RSS), mib(n.KubeProxy.RSS), ratio(div(float64(n.Agent.RSS), float64(n.KubeProxy.RSS))),
			kib(n.ProactiveBytes), kib(n.OnDemandBytes)})
	}
	if len(t.Rows) > 0 {
		sec.Tables = append(sec.Tables, t)
	}
	r := render.Table{Caption: "restarted with every object present (a node joining): from the new container's start", Header: []string{"node", "program", "programmed in", "CPU s", "VmRSS", "VmHWM"}}
	for _, n := range s.Nodes {
		for _, x := range []struct {
			name string
			s    *result.Side
		}{{"agent", n.AgentRestart}, {"kube-proxy", n.KubeProxyRestart}} {
			if x.s != nil {
				r.Rows = append(r.Rows, []string{n.Node, x.name, secs(x.s.Programmed), fmt.Sprintf("%.2f", x.s.CPUSeconds), mib(x.s.RSS), mib(x.s.HWM)})
			}
		}
	}
	if len(r.Rows) > 0 {
		sec.Tables = append(sec.Tables, r)
	}
	return sec
}

func kib(b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f KiB", float64(b)/1024)
}

func div(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
