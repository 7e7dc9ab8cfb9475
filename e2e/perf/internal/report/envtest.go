// Sections of the envtest scale results (e2e/scale/scaleresult): how cost grows, new
// connections while connections are held, and on-demand CDS's first connections.

package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
)

const (
	growthTitle   = "How cost grows (envtest)"
	heldTitle     = "New connections while connections are held (envtest)"
	onDemandTitle = "On-demand CDS: the first connection to a Service (envtest)"
)

// envtestSections is one section per envtest scale test: its figures, that it did not run
// (and the make target that runs it), or that its file could not be read.
func envtestSections(e *scaleresult.Results) []Section {
	one := func(title, file, target string, present bool, section func() Section) Section {
		if err, bad := e.Unread[file]; bad {
			return Section{Title: title, Intro: "could not be read: " + err.Error()}
		}
		if !present {
			return Section{Title: title, Intro: "not run (make " + target + ")"}
		}
		return section()
	}
	return []Section{
		one(growthTitle, scaleresult.GrowthFile, "scale-growth", e.Growth != nil, func() Section { return growthSection(e.Growth) }),
		one(heldTitle, scaleresult.HeldFile, "scale-held", e.Held != nil, func() Section { return heldSection(e.Held) }),
		one(onDemandTitle, scaleresult.OnDemandFile, "scale-ondemand", e.OnDemand != nil, func() Section { return onDemandSection(e.OnDemand) }),
	}
}

// runLoad is an envtest run's Load line: the programs ran as the test's children, the node
// proxy the built-in one.
func runLoad(r scaleresult.RunInfo) string {
	l := func(a [3]float64) string { return fmt.Sprintf("%.2f, %.2f, %.2f", a[0], a[1], a[2]) }
	return fmt.Sprintf("node proxy: the built-in one (nodeproxy/), on envtest; started %s, took %s; load average %s before, %s after, on %d cores",
		r.Started.Format("2006-01-02 15:04:05 MST"), r.Duration.Round(time.Second), l(r.LoadBefore), l(r.LoadAfter), r.CPUs)
}

// runSection is an envtest run's section: its tables if it measured anything (a run that broke
// first has no row to show), its notes after where it stopped, then more.
func runSection(title, intro string, r scaleresult.RunInfo, measured bool, tables []render.Table, more []string) Section {
	s := Section{Title: title, Intro: intro, Load: runLoad(r)}
	if measured {
		s.Tables = tables
	}
	if r.Broke != "" {
		s.Notes = append(s.Notes, "Stopped: "+r.Broke)
	}
	s.Notes = append(append(s.Notes, r.Notes...), more...)
	return s
}

func growthSection(g *scaleresult.Growth) Section {
	intro := fmt.Sprintf("kube-proxy (nftables, in a netns), the agent (proactive CDS) and the node proxy it feeds run from an empty envtest cluster "+
		"while Services are created in steps, %d at a time, each with %d ready endpoints in one EndpointSlice. Push time: from the return of the "+
		"step's last Create until the node proxy's /stats show a cluster for every Service and none warming, polled every %s (its resolution and "+
		"floor); kube-proxy programmed: the same for its nftables, polled every %s. Pushes: the agent's push-duration histogram over the step "+
		"(count and total seconds). MiB are VmRSS after a settle, except the agent's Go heap in use; the ratios are against kube-proxy's.",
		g.Workers, g.EndpointsPer, g.Poll, g.KubeProxyPoll)
	mem := render.Table{Header: []string{"Services", "created in", "push time", "pushes (total s)", "agent MiB", "agent heap MiB", "node proxy MiB",
		"kube-proxy MiB", "agent / kube-proxy", "(agent + node proxy) / kube-proxy", "kube-proxy programmed", "load (1 min)"}}
	cpu := render.Table{Caption: "CPU used during each step, and peak memory", Header: []string{"Services", "CPU s: agent", "node proxy", "kube-proxy",
		"agent / kube-proxy", "(agent + node proxy) / kube-proxy", "VmHWM MiB: agent", "node proxy", "kube-proxy"}}
	var heaps []string
	for _, st := range g.Steps {
		a, p, k := st.Agent, st.NodeProxy, st.KubeProxyCost
		kp := "–"
		if st.KubeProxy > 0 {
			kp = st.KubeProxy.Round(100 * time.Millisecond).String()
		}
		mem.Rows = append(mem.Rows, []string{count(st.Services), st.Created.Round(time.Second).String(), st.Push.Round(10 * time.Millisecond).String(),
			fmt.Sprintf("%d (%.3f)", st.Pushes, st.PushSeconds), scaleresult.MiB(a.RSS), scaleresult.MiB(st.AgentHeapInuse), scaleresult.MiB(p.RSS),
			scaleresult.MiB(k.RSS), ratio(div(float64(a.RSS), float64(k.RSS))), ratio(div(float64(a.RSS+p.RSS), float64(k.RSS))), kp,
			fmt.Sprintf("%.2f", st.LoadAfter[0])})
		cpu.Rows = append(cpu.Rows, []string{count(st.Services), fmt.Sprintf("%.2f", a.CPUSeconds), fmt.Sprintf("%.2f", p.CPUSeconds),
			fmt.Sprintf("%.2f", k.CPUSeconds), ratio(div(a.CPUSeconds, k.CPUSeconds)), ratio(div(a.CPUSeconds+p.CPUSeconds, k.CPUSeconds)),
			scaleresult.MiB(a.HWM), scaleresult.MiB(p.HWM), scaleresult.MiB(k.HWM)})
		if st.NodeProxyHeap != "" {
			heaps = append(heaps, st.NodeProxyHeap)
		}
	}
	var more []string
	if len(heaps) > 0 {
		more = append(more, "The node proxy's heap profiles, beside "+scaleresult.GrowthFile+": "+strings.Join(heaps, ", ")+".")
	}
	return runSection(growthTitle, intro, g.RunInfo, len(g.Steps) > 0, []render.Table{mem, cpu}, more)
}

func heldSection(h *scaleresult.Held) Section {
	intro := fmt.Sprintf("The node proxy serves one Service (%d echo servers) to one captured pod (the agent's capture listener in the pod's netns, "+
		"TPROXY; Phase 1 and 2 on, proactive CDS) while idle connections are held open through it, level by level. At each level %d new "+
		"connections are opened from the pod at %g per second, an open loop: each is timed from when it was due to the echo of its first byte "+
		"(bound %s), so a stall shows in the tail. As many direct connections from the host's netns to the echo servers (no capture, no proxy) "+
		"run in the same window at the same rate: what the machine alone adds. Latencies in ms; the node proxy's VmRSS and fds with the held "+
		"connections open, its CPU per new connection while serving them.", h.Endpoints, h.Conns, h.Rate, h.Timeout)
	t := render.Table{Header: []string{"held", "p50", "p99", "p99.9", "direct p50 / p99 / p99.9", "node proxy VmRSS", "node proxy fds",
		"p99 / first level's", "max", "upstream active", "new (errors)", "generator lag", "node proxy CPU ms / connection", "load (1 min)"}}
	var more []string
	for _, l := range h.Levels {
		b0 := h.Levels[0].Latency
		cpu := "–"
		if n := l.Latency.N + l.Errors; n > 0 {
			cpu = fmt.Sprintf("%.3f", l.CPUSeconds*1000/float64(n))
		}
		t.Rows = append(t.Rows, []string{count(l.Held), msCell(l.Latency.P50), msCell(l.Latency.P99), msCell(l.Latency.P999),
			msCell(l.Direct.P50) + " / " + msCell(l.Direct.P99) + " / " + msCell(l.Direct.P999), mib(l.NodeProxy.RSS), count(l.NodeProxyFDs),
			ratio(div(float64(l.Latency.P99), float64(b0.P99))), msCell(l.Latency.Max), count(int(l.Active)),
			fmt.Sprintf("%s (%d)", count(l.Latency.N+l.Errors), l.Errors), msCell(l.Lag), cpu, fmt.Sprintf("%.2f", l.LoadAfter[0])})
		if l.Errors > 0 || l.DirectErrors > 0 {
			more = append(more, fmt.Sprintf("%s held: %d connections failed, %d direct ones; %s", count(l.Held), l.Errors, l.DirectErrors,
				strings.Join(l.ErrorSamples, "; ")))
		}
	}
	return runSection(heldTitle, intro, h.RunInfo, len(h.Levels) > 0, []render.Table{t}, more)
}

func onDemandSection(o *scaleresult.OnDemand) Section {
	intro := fmt.Sprintf("The agent in on-demand CDS mode and the node proxy serve the same captured pod; %s Services exist, each with %d echo "+
		"servers. Each level starts a fresh agent and node proxy whose demand file names that many Services (the agent's restart path). Then "+
		"%d first connections, each to a Service of its own not yet demanded, which the proxy's tcp_proxy holds until the agent admits it "+
		"and its cluster is warm, then as many to demanded Services, both at %g per second (open loop), each timed from when it was due to "+
		"the echo of its first byte (bound %s). Latencies in ms; ready in: from the agent's start until every demanded cluster was warm.",
		count(o.Services), o.Endpoints, o.Conns, o.Rate, o.Timeout)
	t := render.Table{Header: []string{"demanded", "first p50", "first p99", "demanded p50", "demanded p99", "first / demanded p50",
		"agent pushes (mean)", "agent VmRSS", "node proxy VmRSS", "ready in", "first max", "errors: first", "demanded", "on-demand attempts", "load (1 min)"}}
	var more []string
	for _, l := range o.Levels {
		pushes := strconv.FormatUint(l.Pushes, 10)
		if l.Pushes > 0 {
			pushes += fmt.Sprintf(" (%.1f ms)", l.PushSeconds*1000/float64(l.Pushes))
		}
		t.Rows = append(t.Rows, []string{count(l.Demanded), msCell(l.First.P50), msCell(l.First.P99), msCell(l.Known.P50), msCell(l.Known.P99),
			ratio(div(float64(l.First.P50), float64(l.Known.P50))), pushes, mib(l.Agent.RSS), mib(l.NodeProxy.RSS),
			l.Ready.Round(100 * time.Millisecond).String(), msCell(l.First.Max), strconv.Itoa(l.FirstErrors), strconv.Itoa(l.KnownErrors),
			strconv.FormatInt(l.Attempts, 10), fmt.Sprintf("%.2f", l.LoadAfter[0])})
		if len(l.ErrorSamples) > 0 {
			more = append(more, fmt.Sprintf("%s demanded: %s", count(l.Demanded), strings.Join(l.ErrorSamples, "; ")))
		}
		if l.NodeProxyCPUProfile != "" {
			more = append(more, fmt.Sprintf("%s demanded: the node proxy's CPU profile over the first connections, beside %s: %s",
				count(l.Demanded), scaleresult.OnDemandFile, l.NodeProxyCPUProfile))
		}
	}
	return runSection(onDemandTitle, intro, o.RunInfo, len(o.Levels) > 0, []render.Table{t}, more)
}

// msCell is d in ms to three significant digits (1.43, 33.2, 226), as docs/perf.md gives them.
func msCell(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// count is n with thousands separated by commas (10,000).
func count(n int) string {
	if n < 0 {
		return "-" + count(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
