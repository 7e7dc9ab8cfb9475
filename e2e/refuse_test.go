package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/e2e/internal/kube"
)

const (
	refusedMetric = "svclb_svc_refused_total"
	// refuseAttemptsPerClient is how many connections each meshed client
	// makes in a refusal leg.
	refuseAttemptsPerClient = 5
	// refusalCountWait bounds the wait for the agent's counter to reach the
	// attempts (a red run, which must count nothing, waits all of it).
	refusalCountWait = 5 * time.Second
)

// agentScrape reads and parses every agent's /metrics.
func agentScrape(ctx context.Context) ([]kube.Metrics, error) {
	pods, err := agentPods(ctx)
	if err != nil {
		return nil, err
	}
	var out []kube.Metrics
	for _, p := range pods {
		m, err := agentMetrics(ctx, p.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// agentMetrics reads and parses one agent's /metrics.
func agentMetrics(ctx context.Context, pod string) (kube.Metrics, error) {
	b, err := suite.cluster.PodGet(ctx, systemNS, pod, agentPort, "/metrics")
	if err != nil {
		return nil, err
	}
	m, err := kube.ParseMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", pod, err)
	}
	return m, nil
}

// refusals sums svclb_svc_refused_total over every agent per reason, for one
// Service (ns and name empty: the no-service series).
func refusals(ctx context.Context, ns, name string) (map[string]float64, error) {
	ms, err := agentScrape(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, reason := range []string{"no-endpoints", "port-not-declared", "no-service"} {
		labels := map[string]string{"reason": reason, "namespace": ns, "service": name}
		for _, m := range ms {
			out[reason] += m.Sum(refusedMetric, labels)
		}
	}
	return out, nil
}

// refuseLeg builds a refusal leg: the meshed clients dial target; green is the
// proxy's refusal (accepted, then closed: never ECONNREFUSED from the host) and
// svclb_svc_refused_total{reason, namespace, service} rising by exactly the
// number of attempts, with no other reason counted for that Service.
func refuseLeg(name, reason, setup string, prepare func(ctx context.Context) (to string, svcNS, svcName string, err error)) leg {
	type workload struct{ to, ns, svc string }
	return leg{
		name:       name,
		setup:      setup,
		redExpect:  "no backend reply and no refusal counted (Phase 2 off)",
		greenMeans: fmt.Sprintf("proxy refuses every attempt (accepted then closed, no ECONNREFUSED); %s{reason=%q} rises by exactly the attempts", refusedMetric, reason),
		prepare: func(ctx context.Context) (any, error) {
			to, ns, svc, err := prepare(ctx)
			if err != nil {
				return nil, err
			}
			return &workload{to, ns, svc}, nil
		},
		measure: func(ctx context.Context, w any, run *evidence.Run) {
			wl := w.(*workload)
			before, err := refusals(ctx, wl.ns, wl.svc)
			if err != nil {
				run.Error = err.Error()
				return
			}
			// Every attempt its own connection, all at once: an attempt that
			// is neither refused nor answered (refuse-no-service red: with
			// Phase 1 off an unallocated VIP has no REJECT element) waits for
			// its timeout, and these waits overlap instead of adding up. The
			// count is the same, so the exact-match check below loses nothing.
			var jobs []dialJob
			for i := range suite.clients {
				for range refuseAttemptsPerClient {
					jobs = append(jobs, dialJob{client: &suite.clients[i], to: wl.to, o: dialOpts{count: 1, timeout: 3 * time.Second}})
				}
			}
			rss, err := dialAll(ctx, jobs, len(jobs))
			if err != nil {
				run.Error = err.Error()
				return
			}
			for _, rs := range rss {
				tally(run, rs)
			}
			// The agent counts from the proxy's access log stream, which
			// Envoy flushes every second (CommonGrpcAccessLogConfig
			// buffer_flush_interval default, api/envoy/extensions/access_loggers/grpc/v3/als.proto):
			// give it a few flushes, and accept only an exact match.
			var after map[string]float64
			deadline := time.Now().Add(refusalCountWait)
			for {
				if after, err = refusals(ctx, wl.ns, wl.svc); err != nil {
					run.Error = err.Error()
					return
				}
				if after[reason]-before[reason] >= float64(run.Attempts) || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			run.Counters = map[string]float64{}
			other := 0.0
			for r := range after {
				d := after[r] - before[r]
				run.Counters[fmt.Sprintf("%s{reason=%q,namespace=%q,service=%q}", refusedMetric, r, wl.ns, wl.svc)] = d
				if r != reason {
					other += d
				}
			}
			got := after[reason] - before[reason]
			refusedByProxy := run.Attempts > 0 && run.ProxyClosed == run.Attempts
			run.MetGreen = refusedByProxy && got == float64(run.Attempts) && other == 0
			run.MetRed = run.Attempts > 0 && run.Replies == 0 && got == 0 && other == 0
			run.Summary = fmt.Sprintf("%s; %s +%g (want +%d)", countsSummary(run), reason, got, run.Attempts)
		},
	}
}

var _ = defineLeg(refuseLeg("refuse-no-endpoints", "no-endpoints",
	"ClusterIP Service whose selector matches no pod, kube-proxy objects deleted on every node",
	func(ctx context.Context) (string, string, string, error) {
		svc := legService("noep", svcOpts{selector: map[string]string{"app": "nothing-matches-this"}, guarded: true})
		if err := create(ctx, svc); err != nil {
			return "", "", "", err
		}
		if _, err := waitCutEverywhere(ctx, svc, time.Minute); err != nil {
			return "", "", "", err
		}
		return net.JoinHostPort(svc.Spec.ClusterIP, "80"), svc.Namespace, svc.Name, nil
	}))

var _ = defineLeg(refuseLeg("refuse-port-not-declared", "port-not-declared",
	"ClusterIP Service with a backend on port 80, dialled on port 81 it does not declare",
	func(ctx context.Context) (string, string, string, error) {
		svc, err := deployEcho(ctx, "pnd", backendOpts{replicas: 1}, svcOpts{guarded: true})
		if err != nil {
			return "", "", "", err
		}
		return net.JoinHostPort(svc.Spec.ClusterIP, "81"), svc.Namespace, svc.Name, nil
	}))

var _ = defineLeg(refuseLeg("refuse-no-service", "no-service",
	"an address in the Service range that no Service holds",
	func(ctx context.Context) (string, string, string, error) {
		ip, err := unallocatedServiceIP(ctx)
		if err != nil {
			return "", "", "", err
		}
		return net.JoinHostPort(ip.String(), "80"), "", "", nil
	}))

// unallocatedServiceIP picks the highest address of the Service range (from
// the ServiceCIDR objects) that no Service holds.
func unallocatedServiceIP(ctx context.Context) (netip.Addr, error) {
	cidrs, err := suite.cluster.CS.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	svcs, err := suite.cluster.CS.CoreV1().Services(corev1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list Services: %w", err)
	}
	used := map[string]bool{}
	for _, s := range svcs.Items {
		for _, ip := range s.Spec.ClusterIPs {
			used[ip] = true
		}
	}
	for _, c := range cidrs.Items {
		for _, s := range c.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil || !p.Addr().Is4() {
				continue
			}
			// Last address of the prefix, minus the broadcast-like last one.
			a := lastAddr(p).Prev()
			for i := 0; i < 16 && p.Contains(a); i, a = i+1, a.Prev() {
				if !used[a.String()] {
					return a, nil
				}
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("no unallocated IPv4 address found in the ServiceCIDRs")
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
