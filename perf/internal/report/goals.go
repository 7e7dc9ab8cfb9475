package report

import (
	"fmt"

	"github.com/aether-mesh/svclb/perf/internal/result"
)

// goalSize is the size issue 17's CPU and RSS goals are stated at.
const goalSize = 5000

func goals(r *result.Results) []Goal {
	var out []Goal
	ec := r.EndpointChange
	add := func(name, target string, limit float64, measured map[string]float64, order []string) {
		g := Goal{Name: name, Target: target}
		if len(measured) == 0 {
			g.Measured, g.Verdict = "not measured", "not measured"
			out = append(out, g)
			return
		}
		g.Met = true
		for i, k := range order {
			v, ok := measured[k]
			if !ok {
				continue
			}
			if i > 0 && g.Measured != "" {
				g.Measured += ", "
			}
			g.Measured += fmt.Sprintf("%s %.3f", k, v)
			if v > limit || v == 0 {
				g.Met = false
			}
		}
		g.Verdict = "missed"
		if g.Met {
			g.Verdict = "met"
		}
		out = append(out, g)
	}
	changes := func(q int) map[string]float64 {
		if ec == nil {
			return nil
		}
		rr := [3]float64{}
		gg := [3]float64{}
		rr[0], rr[1], rr[2] = ec.Ready.Ratios()
		gg[0], gg[1], gg[2] = ec.Gone.Ratios()
		return map[string]float64{"ready": rr[q], "gone": gg[q]}
	}
	add("endpoint change p50", "≤ 0.1", 0.1, changes(0), []string{"ready", "gone"})
	add("endpoint change p99", "≤ 0.25", 0.25, changes(2), []string{"ready", "gone"})
	var ns map[string]float64
	if r.NewService != nil {
		p50, _, _ := r.NewService.FromSlice.Ratios()
		ns = map[string]float64{"from the slice event": p50}
	}
	add("new Service p50", "≤ 0.2", 0.2, ns, []string{"from the slice event"})
	var cpu, rss map[string]float64
	for _, s := range r.Scale {
		if s.Services != goalSize || len(s.Nodes) == 0 {
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
		cpu = map[string]float64{"while created": div(a, k)}
		if rk > 0 {
			cpu["restarted"] = div(ra, rk)
		}
		rss = map[string]float64{"VmRSS": div(ar, kr)}
	}
	add(fmt.Sprintf("CPU-seconds to program %d Services", goalSize), "≤ 0.5", 0.5, cpu, []string{"while created", "restarted"})
	add(fmt.Sprintf("RSS at %d Services", goalSize), "≤ 1.0", 1.0, rss, []string{"VmRSS"})
	return out
}
