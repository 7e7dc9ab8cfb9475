package measure

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// refusedSeries is one series of the agent's agent.RefusedMetric.
type refusedSeries struct{ reason, namespace, service string }

// nodeDelta is what one node's proxy and agent counted during a run.
type nodeDelta struct {
	// stats is the rise of the node proxy's /stats counters, by name.
	stats map[string]int64
	// refused is the rise of the agent's refusal counter, by series.
	refused map[refusedSeries]float64
}

// refusedOf sums the rise of the refusals of Service key (namespace/name,
// "" for no Service), of reason or of every reason when reason is "".
func (d nodeDelta) refusedOf(key, reason string) float64 {
	var sum float64
	for s, v := range d.refused {
		k := ""
		if s.service != "" {
			k = s.namespace + "/" + s.service
		}
		if k == key && (reason == "" || s.reason == reason) {
			sum += v
		}
	}
	return sum
}

func (d nodeDelta) refusedTotal() float64 {
	var sum float64
	for _, v := range d.refused {
		sum += v
	}
	return sum
}

// The capture listener's chains whose tcp_proxy stats tell the paths apart
// (internal/translate CaptureListener): Service-range traffic goes to
// cap_svc with Phase 1 on, to cap_passthrough_svc (kube-proxy's path) with
// it off. Everything outside the range takes the default chain
// cap_passthrough.
var (
	statSvcCx      = proxy.TCPStat(contract.ChainSvc, proxy.DownstreamCxTotal)
	statPassSvcCx  = proxy.TCPStat(contract.ChainPassthroughSvc, proxy.DownstreamCxTotal)
	statPassCx     = proxy.TCPStat(contract.ChainPassthrough, proxy.DownstreamCxTotal)
	statSvcNoRoute = proxy.TCPStat(contract.ChainSvc, proxy.DownstreamCxNoRoute)
)

// clusterStat is the counter name of the svc: cluster of d's port.
func clusterStat(d Dialled, name string) string {
	return proxy.ClusterStat(contract.StatName(d.Namespace, d.Service, d.port()), name)
}

// buildChecks turns what the clients saw (run's flows) and what every node
// counted (deltas) into the run's checks, per client node:
//
//   - tcp.cap_svc.downstream_cx_total rose by at least the node's attempts
//     to the dialled targets in green, not at all in red;
//     tcp.cap_passthrough_svc.downstream_cx_total the other way round;
//   - cluster.<alt_stat_name>.upstream_cx_total of each dialled Service
//     port rose by at least the node's replies from it in green (a
//     connection retried after a failed connect counts twice), not at all
//     in red (no svc: cluster exists then);
//   - the agent's refusals of each dialled Service (every reason) rose by
//     exactly the node's proxy-closed attempts to it in green: every
//     connection the proxy closed was a refusal and was counted, nothing
//     else was; by nothing in red (Phase 2 off); with a declared Reason,
//     that reason's series alone rose by as much;
//
// and, for each target with a Reason, the agent's refusal log holds at
// least one record of it (reason, Service, destination To) in green, none
// in red. Attempts to targets OutsideRange need, in both runs,
// tcp.cap_passthrough.downstream_cx_total to rise by at least as many.
func buildChecks(nodes []string, run *evidence.Run, dialled []Dialled, deltas map[string]nodeDelta, records []evidence.Refusal) []evidence.Check {
	var out []evidence.Check
	outside, inside := split(dialled)
	keys := serviceKeys(inside)
	for _, n := range nodes {
		d := deltas[n]
		if f := run.FromNode(n, tos(outside)...); len(outside) > 0 && f.Attempts > 0 {
			out = append(out, evidence.Check{Node: n, What: statPassCx, Got: float64(d.stats[statPassCx]),
				Why:   fmt.Sprintf("%d attempts outside the Service range from %s", f.Attempts, n),
				Green: evidence.AtLeast(float64(f.Attempts)), Red: evidence.AtLeast(float64(f.Attempts))})
		}
		if k := kept(dialled); len(k) > 0 {
			if f := run.FromNode(n, tos(k)...); f.Attempts > 0 {
				out = append(out, evidence.Check{Node: n, What: statPassSvcCx, Got: float64(d.stats[statPassSvcCx]),
					Why:   fmt.Sprintf("%d attempts to Services kube-proxy keeps from %s", f.Attempts, n),
					Green: evidence.AtLeast(float64(f.Attempts)), Red: evidence.AtLeast(float64(f.Attempts))})
			}
		}
		dialled := inside
		all := run.FromNode(n, tos(dialled)...)
		if len(dialled) == 0 {
			continue
		}
		var stray float64
		for _, k := range keys {
			stray += d.refusedOf(k, "")
		}
		if all.Attempts == 0 && stray == 0 {
			continue
		}
		add := func(what string, got float64, why string, green, red evidence.Want) {
			out = append(out, evidence.Check{Node: n, What: what, Got: got, Why: why, Green: green, Red: red})
		}
		if all.Attempts > 0 {
			why := fmt.Sprintf("%d attempts from %s", all.Attempts, n)
			add(statSvcCx, float64(d.stats[statSvcCx]), why, evidence.AtLeast(float64(all.Attempts)), evidence.Exactly(0))
			add(statPassSvcCx, float64(d.stats[statPassSvcCx]), why, evidence.Exactly(0), evidence.AtLeast(float64(all.Attempts)))
		}
		for _, t := range dialled {
			f := run.FromNode(n, t.To)
			if t.Service == "" || f.Attempts == 0 {
				continue
			}
			s := clusterStat(t, proxy.UpstreamCxTotal)
			add(s, float64(d.stats[s]), fmt.Sprintf("%d replies to %s on %s", f.Replies, t.To, n),
				evidence.AtLeast(float64(f.Replies)), evidence.Exactly(0))
		}
		for _, k := range keys {
			closed := proxyClosed(run, n, dialled, k, "")
			if created(dialled, k) {
				add(refusedName("", k)+" + "+refusedName(agent.ReasonNoService, ""), d.refusedOf(k, "")+d.refusedOf("", agent.ReasonNoService),
					fmt.Sprintf("%d proxy-closed attempts on %s, some before the Service was created", closed, n),
					evidence.Exactly(float64(closed)), evidence.Exactly(0))
				continue
			}
			add(refusedName("", k), d.refusedOf(k, ""), fmt.Sprintf("%d proxy-closed attempts on %s", closed, n),
				evidence.Exactly(float64(closed)), evidence.Exactly(0))
		}
		for _, kr := range reasons(dialled) {
			closed := proxyClosed(run, n, dialled, kr[0], kr[1])
			add(refusedName(kr[1], kr[0]), d.refusedOf(kr[0], kr[1]), fmt.Sprintf("%d proxy-closed attempts on %s", closed, n),
				evidence.Exactly(float64(closed)), evidence.Exactly(0))
		}
	}
	for _, t := range inside {
		if t.Reason == "" {
			continue
		}
		got := 0
		for _, r := range records {
			if matches(r, t) {
				got++
			}
		}
		out = append(out, evidence.Check{What: fmt.Sprintf("refusal log records reason=%s %s", t.Reason, t),
			Got: float64(got), Why: "the agent's record of a refused connection", Green: evidence.AtLeast(1), Red: evidence.Exactly(0)})
	}
	return out
}

// firstRecords is, per target with a Reason, the first record of it.
func firstRecords(dialled []Dialled, records []evidence.Refusal) []evidence.Refusal {
	var out []evidence.Refusal
	for _, t := range dialled {
		if t.Reason == "" {
			continue
		}
		var first *evidence.Refusal
		for i := range records {
			if matches(records[i], t) && (first == nil || records[i].At.Before(first.At)) {
				first = &records[i]
			}
		}
		if first != nil {
			out = append(out, *first)
		}
	}
	return out
}

func matches(r evidence.Refusal, t Dialled) bool {
	return r.Reason == t.Reason && r.Namespace == t.Namespace && r.Service == t.Service && r.Destination == t.To
}

// created reports whether the Service of key is created during the run
// (Dialled.CreatedInRun).
func created(dialled []Dialled, key string) bool {
	return slices.ContainsFunc(dialled, func(t Dialled) bool { return t.CreatedInRun && t.serviceKey() == key })
}

// proxyClosed sums the proxy-closed attempts from node to the targets of
// Service key (and of reason, when set).
func proxyClosed(run *evidence.Run, node string, dialled []Dialled, key, reason string) int {
	var to []string
	for _, t := range dialled {
		if t.serviceKey() == key && (reason == "" || t.Reason == reason) && !t.UpstreamFailures {
			to = append(to, t.To)
		}
	}
	if len(to) == 0 { // FromNode without destinations counts them all
		return 0
	}
	return run.FromNode(node, to...).ProxyClosed
}

func refusedName(reason, key string) string {
	ns, name, _ := strings.Cut(key, "/")
	if reason == "" {
		return fmt.Sprintf("%s{namespace=%q,service=%q}", agent.RefusedMetric, ns, name)
	}
	return fmt.Sprintf("%s{reason=%q,namespace=%q,service=%q}", agent.RefusedMetric, reason, ns, name)
}

// split parts the targets outside the Service range and those kube-proxy
// keeps from the rest (svclb's).
func split(dialled []Dialled) (outside, inside []Dialled) {
	for _, d := range dialled {
		switch {
		case d.OutsideRange:
			outside = append(outside, d)
		case !d.KubeProxys:
			inside = append(inside, d)
		}
	}
	return outside, inside
}

// kept are the targets kube-proxy keeps (Dialled.KubeProxys).
func kept(dialled []Dialled) []Dialled {
	var out []Dialled
	for _, d := range dialled {
		if d.KubeProxys {
			out = append(out, d)
		}
	}
	return out
}

func tos(dialled []Dialled) []string {
	out := make([]string, 0, len(dialled))
	for _, t := range dialled {
		out = append(out, t.To)
	}
	return out
}

func serviceKeys(dialled []Dialled) []string {
	var out []string
	for _, t := range dialled {
		if k := t.serviceKey(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// reasons are the distinct (Service key, reason) pairs declared.
func reasons(dialled []Dialled) [][2]string {
	var out [][2]string
	for _, t := range dialled {
		if kr := [2]string{t.serviceKey(), t.Reason}; t.Reason != "" && !slices.Contains(out, kr) {
			out = append(out, kr)
		}
	}
	return out
}
