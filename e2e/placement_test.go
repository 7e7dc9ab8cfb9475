package e2e

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

// workers are the nodes whose name says worker (kind names them
// <cluster>-worker, <cluster>-worker2), sorted.
func workers() []evidence.Node {
	var out []evidence.Node
	for _, n := range suite.nodes {
		if strings.Contains(n.Name, "worker") {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func nodeNames(ns []evidence.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

// dialEach dials from every meshed client and returns the results per client
// node; it tallies everything into run.
func dialEach(ctx context.Context, run *evidence.Run, to string, o dialOpts) map[string][]echo.Result {
	out := map[string][]echo.Result{}
	for _, c := range suite.clients {
		rs, err := dial(ctx, &c, to, o)
		if err != nil {
			run.Error = err.Error()
			return nil
		}
		tally(run, rs)
		out[c.Spec.NodeName] = rs
	}
	return out
}

// placed is a Service with one echo backend on each of the given nodes.
type placed struct {
	svc   *corev1.Service
	to    string
	nodes []string
}

func deployPlaced(ctx context.Context, name string, nodes []string, guarded bool, mutate func(*corev1.Service)) (*placed, error) {
	svc, err := deployEcho(ctx, name, backendOpts{replicas: int32(len(nodes)), nodes: nodes}, svcOpts{guarded: guarded, mutate: mutate})
	if err != nil {
		return nil, err
	}
	pods, err := waitPodsReady(ctx, "app="+name, len(nodes), time.Minute)
	if err != nil {
		return nil, err
	}
	got := map[string]bool{}
	for _, p := range pods {
		got[p.Spec.NodeName] = true
	}
	if len(got) != len(nodes) {
		return nil, fmt.Errorf("%s: want one backend on each of %v, got pods on %v", name, nodes, got)
	}
	return &placed{svc: svc, to: net.JoinHostPort(svc.Spec.ClusterIP, "80"), nodes: nodes}, nil
}

// itp-local: only same-node endpoints; a node without one refuses.
var _ = defineLeg(leg{
	name:       "itp-local",
	setup:      "internalTrafficPolicy Local, one echo backend on each worker, none on the control plane; kube-proxy objects deleted",
	redExpect:  "no backend reply from any node",
	greenMeans: "clients on a worker reach only their own node's backend; the client on the control plane is refused (no-endpoints)",
	prepare: func(ctx context.Context) (any, error) {
		return deployPlaced(ctx, "itp", nodeNames(workers()), true, func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		})
	},
	measure: func(ctx context.Context, w any, run *evidence.Run) {
		p := w.(*placed)
		before, err := refusals(ctx, p.svc.Namespace, p.svc.Name)
		if err != nil {
			run.Error = err.Error()
			return
		}
		per := dialEach(ctx, run, p.to, quick)
		if run.Error != "" {
			return
		}
		time.Sleep(2 * time.Second) // the refusal counter follows the access log stream
		after, err := refusals(ctx, p.svc.Namespace, p.svc.Name)
		if err != nil {
			run.Error = err.Error()
			return
		}
		refused := after["no-endpoints"] - before["no-endpoints"]
		run.Counters = map[string]float64{fmt.Sprintf(`%s{reason="no-endpoints",service=%q}`, refusedMetric, p.svc.Name): refused}
		ok, wrong, expectRefused := true, 0, 0
		for node, rs := range per {
			local := contains(p.nodes, node)
			for _, r := range rs {
				switch {
				case local && (r.Reply == nil || r.Reply.Node != node):
					ok = false
					if r.Reply != nil {
						wrong++
					}
				case !local:
					expectRefused++
					if r.Reply != nil || outcome(r) != "proxy-closed" {
						ok = false
					}
				}
			}
		}
		run.MetGreen = ok && run.Attempts > 0 && refused == float64(expectRefused)
		run.MetRed = run.Attempts > 0 && run.Replies == 0
		run.Summary = fmt.Sprintf("%s; %d replies from another node; no-endpoints +%g (want +%d from the node without a backend)",
			countsSummary(run), wrong, refused, expectRefused)
	},
})

// topology: PreferClose keeps a client in its zone while the zone has an
// endpoint and spills to other zones when it has none.
var _ = defineLeg(leg{
	name:       "topology",
	setup:      "trafficDistribution PreferClose, one echo backend in zone-a and one in zone-b (none in zone-c); kube-proxy objects deleted",
	redExpect:  "no backend reply from any node",
	greenMeans: "clients in zone-a and zone-b reach only their own zone; the client in zone-c (no endpoint) reaches the other zones",
	prepare: func(ctx context.Context) (any, error) {
		return deployPlaced(ctx, "topo", nodeNames(workers()), true, func(s *corev1.Service) {
			s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		})
	},
	measure: func(ctx context.Context, w any, run *evidence.Run) {
		p := w.(*placed)
		per := dialEach(ctx, run, p.to, dialOpts{count: 12, interval: 30 * time.Millisecond, timeout: 2 * time.Second})
		if run.Error != "" {
			return
		}
		ok, crossZone, spill := true, 0, map[string]int{}
		for node, rs := range per {
			zone := zoneOf(node)
			hasLocal := contains(p.nodes, node)
			for _, r := range rs {
				if r.Reply == nil || !r.OK {
					ok = false
					continue
				}
				rz := zoneOf(r.Reply.Node)
				switch {
				case hasLocal && rz != zone:
					ok = false
					crossZone++
				case !hasLocal:
					spill[rz]++
				}
			}
		}
		// Without a local endpoint the client must use the other zones.
		if len(p.nodes) > 0 && len(spill) == 0 {
			ok = false
		}
		run.MetGreen = ok && run.Attempts > 0
		run.MetRed = run.Attempts > 0 && run.Replies == 0
		run.Summary = fmt.Sprintf("%s; %d cross-zone replies where a same-zone endpoint exists; zone without endpoints reached %v", countsSummary(run), crossZone, spill)
	},
})

// passthrough: traffic outside the Service range goes through the proxy's
// passthrough unchanged, whatever the Phase flags.
var _ = defineLeg(leg{
	name:       "passthrough",
	control:    true,
	setup:      "a meshed client dials an echo pod's own IP:8080 (outside the Service range)",
	redExpect:  "same as green: the Phase flags do not touch traffic outside the Service range (control leg)",
	greenMeans: "every attempt reaches the pod, and the pod sees the node's address as peer (the proxy's passthrough carried it, not a direct connection)",
	prepare: func(ctx context.Context) (any, error) {
		dep := echoDeployment("pass", backendOpts{replicas: 1})
		if err := create(ctx, dep); err != nil {
			return nil, err
		}
		pods, err := waitPodsReady(ctx, "app=pass", 1, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		return net.JoinHostPort(pods[0].Status.PodIP, fmt.Sprint(echoPort)), nil
	},
	measure: func(ctx context.Context, w any, run *evidence.Run) {
		to := w.(string)
		direct := 0
		for _, c := range suite.clients {
			rs, err := dial(ctx, &c, to, quick)
			if err != nil {
				run.Error = err.Error()
				return
			}
			tally(run, rs)
			for _, r := range rs {
				if r.Reply != nil {
					if host, _, _ := net.SplitHostPort(r.Reply.Peer); host == c.Status.PodIP {
						direct++
					}
				}
			}
		}
		run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts && direct == 0
		run.MetRed = run.MetGreen
		run.Summary = fmt.Sprintf("%s; %d replies saw the client pod's own address (not captured)", countsSummary(run), direct)
	},
})

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
