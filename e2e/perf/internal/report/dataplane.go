// The data-plane section: four paths side by side, their ratios to the wire
// (a) and to today's meshed path (c), and the goals judged on them.

package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/perf/internal/tcpstat"
)

// pathColors are the paths' series colours, by key.
var pathColors = map[string]string{
	result.PathWire: "#57606a", result.PathKubeProxy: colorKubeProxy,
	result.PathPhase0: "#8250df", result.PathPhase1: colorAgent,
}

// dataGoal is one data-plane goal: num/den of a figure, at most or at
// least limit.
type dataGoal struct {
	name, num, den string
	atLeast        bool
	limit          float64
	figures        []dataFigure
}

// dataFigure is one figure of a path a goal compares.
type dataFigure struct {
	name string
	of   func(p *result.DataPath) float64
}

var (
	p50       = dataFigure{"p50", func(p *result.DataPath) float64 { return p.Open.Latency.P50 }}
	p99       = dataFigure{"p99", func(p *result.DataPath) float64 { return p.Open.Latency.P99 }}
	bulk1     = dataFigure{"1 stream", func(p *result.DataPath) float64 { return p.Bulk1.MiBps }}
	bulk8     = dataFigure{"8 streams", func(p *result.DataPath) float64 { return p.Bulk8.MiBps }}
	connsRate = dataFigure{"conns/s", func(p *result.DataPath) float64 { return p.Closed.PerSecond }}
)

var dataGoals = []dataGoal{
	{"setup to first byte, (d)/(c)", "d", "c", false, 1.0, []dataFigure{p50, p99}},
	{"setup to first byte, (d)/(b)", "d", "b", false, 1.3, []dataFigure{p50}},
	{"bulk throughput, (d)/(a)", "d", "a", true, 0.9, []dataFigure{bulk1, bulk8}},
	{"new connections per second, (d)/(b)", "d", "b", true, 0.5, []dataFigure{connsRate}},
}

// dataplaneGoals judges the data-plane goals; a missed one says by how much.
func dataplaneGoals(d *result.Dataplane) []Goal {
	var out []Goal
	for _, dg := range dataGoals {
		target := "≤ "
		if dg.atLeast {
			target = "≥ "
		}
		g := Goal{Name: dg.name, Target: target + fmt.Sprintf("%.1f", dg.limit), Measured: "not measured", Verdict: "not measured"}
		var num, den *result.DataPath
		if d != nil {
			num, den = d.Path(dg.num), d.Path(dg.den)
		}
		if num == nil || den == nil {
			out = append(out, g)
			continue
		}
		var parts, misses []string
		g.Met = true
		for _, f := range dg.figures {
			v := div(f.of(num), f.of(den))
			parts = append(parts, f.name+" "+ratio(v))
			short := v == 0 || (dg.atLeast && v < dg.limit) || (!dg.atLeast && v > dg.limit)
			if short {
				g.Met = false
				if v > 0 {
					misses = append(misses, fmt.Sprintf("%s by %.0f %%", f.name, math.Abs(v/dg.limit-1)*100))
				} else {
					misses = append(misses, f.name+" not measured")
				}
			}
		}
		g.Measured = strings.Join(parts, ", ")
		g.Verdict = "met"
		if !g.Met {
			g.Verdict = "missed"
			g.Measured += "; missed: " + strings.Join(misses, ", ")
		}
		out = append(out, g)
	}
	return out
}

func dataplaneSection(d *result.Dataplane) Section {
	s := Section{
		Title: "What a connection costs (data plane)",
		Load:  loadLine(d.Header),
		Notes: d.Notes,
	}
	var open, closed, bulk string
	if len(d.Paths) > 0 {
		p := d.Paths[0]
		open = fmt.Sprintf("%d connections at %g/s", p.Open.Latency.N+p.Open.Latency.Failed, p.Open.Rate)
		closed = fmt.Sprintf("%d workers for %.0f s or %d connections, whichever first", p.Closed.Concurrency, p.Closed.For, p.Closed.Max)
		bulk = fmt.Sprintf("%.0f s each", p.Bulk1.Seconds)
	}
	s.Intro = fmt.Sprintf("The same two client pods on %s and the same echo backend on another node, four paths one after the other: "+
		"(a) a plain pod to the endpoint's pod IP (the wire), (b) a plain pod to the ClusterIP (kube-proxy's DNAT), "+
		"(c) a meshed pod with Phase 1 off (the node proxy, then kube-proxy), (d) a meshed pod with Phase 1 on (the node proxy to the endpoint). "+
		"Setup to first byte: an open loop (%s), each connection timed from its scheduled start to the first byte of the server's hello, "+
		"so a client that falls behind adds to the tail instead of hiding it. New connections per second: a closed loop (%s), dial, hello, close. "+
		"Bulk: each stream writes as fast as it can (%s) and reads the echo back; MiB/s counts the bytes echoed, each of which crossed the path both ways. "+
		"Node proxy CPU: %s, over the open loop per 1,000 connections and over both bulk runs per GiB echoed.",
		d.Node, open, closed, bulk, d.CPUSource)
	a, c := d.Path(result.PathWire), d.Path(result.PathPhase0)
	rel := func(v float64, base *result.DataPath, of func(*result.DataPath) float64) string {
		if base == nil {
			return "–"
		}
		return ratio(div(v, of(base)))
	}
	lat := render.Table{Caption: "setup to first byte (open loop), ms",
		Header: []string{"path", "n", "failed", "p50", "p99", "p99.9", "max", "client lag", "p50 / (a)", "p99 / (a)", "p50 / (c)", "p99 / (c)"}}
	thr := render.Table{Caption: "throughput",
		Header: []string{"path", "new conns/s", "/ (a)", "/ (c)", "1 stream MiB/s", "/ (a)", "/ (c)", "8 streams MiB/s", "/ (a)", "/ (c)"}}
	cpu := render.Table{Caption: "node proxy CPU on the clients' node, and that node's CPU over the open loop (on kind, the whole machine's)",
		Header: []string{"path", "peer the backend saw", "CPU s / 1,000 conns", "CPU s / GiB", "open-loop errors", "node CPU busy, open loop", "stolen"}}
	tcp := render.Table{Caption: "TCP counters of the client pod's netns, their growth over the open loop (on (c) and (d) the node proxy's listener is in that netns, and on (d) its upstream)",
		Header: append([]string{"path"}, tcpstat.Watched...)}
	var ss []pathSeries
	for i := range d.Paths {
		p := &d.Paths[i]
		l := p.Open.Latency
		name := "(" + p.Key + ") " + p.Name
		lat.Rows = append(lat.Rows, []string{name, fmt.Sprint(l.N), fmt.Sprint(l.Failed), msf(l.P50), msf(l.P99), msf(l.P999), msf(l.Max), msf(p.Open.MaxLag),
			rel(l.P50, a, p50.of), rel(l.P99, a, p99.of), rel(l.P50, c, p50.of), rel(l.P99, c, p99.of)})
		thr.Rows = append(thr.Rows, []string{name,
			fmt.Sprintf("%.0f", p.Closed.PerSecond), rel(p.Closed.PerSecond, a, connsRate.of), rel(p.Closed.PerSecond, c, connsRate.of),
			fmt.Sprintf("%.0f", p.Bulk1.MiBps), rel(p.Bulk1.MiBps, a, bulk1.of), rel(p.Bulk1.MiBps, c, bulk1.of),
			fmt.Sprintf("%.0f", p.Bulk8.MiBps), rel(p.Bulk8.MiBps, a, bulk8.of), rel(p.Bulk8.MiBps, c, bulk8.of)})
		cpu.Rows = append(cpu.Rows, []string{name, p.Peer, fmt.Sprintf("%.3f", p.CPUPerKConn()), fmt.Sprintf("%.3f", p.CPUPerGiB()), errorsCell(p.Open.Errors),
			share(p.OpenNodeBusy, p.OpenNodeSteal, p.OpenNodeBusy), share(p.OpenNodeBusy, p.OpenNodeSteal, p.OpenNodeSteal)})
		ss = append(ss, pathSeries{name: name, color: pathColors[p.Key], l: l})
		row := []string{name}
		for _, k := range tcpstat.Watched {
			if v, ok := p.OpenTCP[k]; ok {
				row = append(row, fmt.Sprint(v))
			} else {
				row = append(row, "–")
			}
		}
		tcp.Rows = append(tcp.Rows, row)
	}
	s.Tables = []render.Table{lat, thr, cpu, tcp}
	s.Charts = []Figure{{Caption: "setup to first byte by percentile (open loop): x is the percentile in nines, y the latency (log)", Chart: percentileChart(ss...), Whole: true}}
	return s
}

// msf prints milliseconds with the precision a sub-millisecond path needs.
func msf(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// share prints v as a percentage, or "–" when the run read neither share.
func share(busy, steal, v float64) string {
	if busy == 0 && steal == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*v)
}

func errorsCell(errs map[string]int) string {
	if len(errs) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, errs[k]))
	}
	return strings.Join(parts, ", ")
}
