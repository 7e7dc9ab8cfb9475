package report

import (
	"fmt"
	"strings"

	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
)

// goalSize is the size the CPU and RSS goals (docs/perf.md) are stated at.
const goalSize = 5000

// measure is one measured ratio a goal is judged on.
type measure struct {
	name string
	r    result.Ratio
}

func goals(r *result.Results) []Goal {
	var out []Goal
	ec := r.EndpointChange
	// add judges a goal on ms; also is shown beside them, not judged.
	add := func(name, target string, limit float64, ms []measure, also string) {
		g := Goal{Name: name, Target: target}
		if len(ms) == 0 {
			g.Measured, g.Verdict = "not measured", "not measured"
			if also != "" {
				g.Measured += ": " + also
			}
			out = append(out, g)
			return
		}
		g.Met = true
		var parts []string
		for _, m := range ms {
			parts = append(parts, m.name+" "+m.r.String())
			if m.r.V > limit || m.r.V <= 0 {
				g.Met = false
			}
		}
		g.Measured = strings.Join(parts, ", ")
		if also != "" {
			g.Measured += "; " + also
		}
		g.Verdict = "missed"
		if g.Met {
			g.Verdict = "met"
		}
		out = append(out, g)
	}
	// changes are the endpoint-change ratios at quantile q from the slice
	// event (the goals' clock, judged), and from the gate flip (a bound that
	// precedes both paths, shown).
	changes := func(q int) ([]measure, string) {
		if ec == nil {
			return nil, ""
		}
		rr, gg := ec.Ready.Ratios(ec.Interval), ec.Gone.Ratios(ec.Interval)
		ms := []measure{{"ready", rr[q]}, {"gone", gg[q]}}
		if ec.ReadyFromFlip.Agent.N == 0 {
			return ms, ""
		}
		fr, fg := ec.ReadyFromFlip.Ratios(ec.Interval), ec.GoneFromFlip.Ratios(ec.Interval)
		return ms, fmt.Sprintf("from the gate flip: ready %s, gone %s", fr[q], fg[q])
	}
	ms, also := changes(0)
	add("endpoint change p50", "≤ 0.1", 0.1, ms, also)
	ms, also = changes(2)
	add("endpoint change p99", "≤ 0.25", 0.25, ms, also)
	var ns []measure
	also = ""
	if r.NewService != nil {
		ns = []measure{{"from the slice event", r.NewService.FromSlice.Ratios(r.NewService.Interval)[0]}}
		also = "from Create " + r.NewService.FromCreate.Ratios(r.NewService.Interval)[0].String()
	}
	add("new Service p50", "≤ 0.2", 0.2, ns, also)
	var cpu, rss []measure
	stopped := ""
	for _, s := range r.Scale {
		if s.Services != goalSize || len(s.Nodes) == 0 {
			continue
		}
		if s.Broke != "" && s.Nodes[0].Agent.Programmed == 0 {
			stopped = fmt.Sprintf("the %d-Service run stopped before both had programmed (its section says where)", goalSize)
			continue
		}
		var a, k, ar, kr, ra, rk float64
		for _, n := range s.Nodes {
			a += n.Agent.CPUSeconds
			k += n.KubeProxy.CPUSeconds
			ar += float64(n.Agent.RSS)
			kr += float64(n.KubeProxy.RSS)
			if n.AgentRestart != nil && n.KubeProxyRestart != nil {
				ra += n.AgentRestart.CPUSeconds
				rk += n.KubeProxyRestart.CPUSeconds
			}
		}
		cpu = []measure{{"while created", result.Ratio{V: div(a, k)}}}
		if rk > 0 {
			cpu = append(cpu, measure{"restarted", result.Ratio{V: div(ra, rk)}})
		}
		rss = []measure{{"VmRSS", result.Ratio{V: div(ar, kr)}}}
	}
	add(fmt.Sprintf("CPU-seconds to program %d Services", goalSize), "≤ 0.5", 0.5, cpu, stopped)
	add(fmt.Sprintf("RSS at %d Services", goalSize), "≤ 1.0", 1.0, rss, stopped)
	return out
}
