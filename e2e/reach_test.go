package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// reach: a meshed pod reaches a non-mesh ClusterIP Service whose kube-proxy
// objects are gone, through the node proxy's svc: cluster.
var _ = leg.Define(legs, leg.Leg[*corev1.Service]{
	Name:      "reach",
	Early:     true,
	Workloads: "Service reach (2 echo backends, cut); clients on every node",
	Exercises: "internal/translate/listener.go (cap_svc chain, set_filter_state svc:VIP:port and the upstream netns), internal/translate/cluster.go and endpoints.go " +
		"(svc: cluster, EDS, SvcUpstreamBindConfig), pkg/svcindex/index.go (Service range)",
	Setup:     "non-mesh ClusterIP Service (2 echo backends), kube-proxy ClusterIP entries deleted on every node; a meshed client on every node",
	RedExpect: "no backend reply: passthrough to the VIP hits kube-proxy's REJECT, the proxy closes the client's connection",
	GreenMeans: "every attempt from every meshed client gets a backend's reply, through its own node's svc: cluster, " +
		"and the backend sees the client pod's address as peer, as through kube-proxy",
	Chance: allSucceed,
	Prepare: func(ctx context.Context) (*corev1.Service, error) {
		return workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "reach", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true})
	},
	Services: func(svc *corev1.Service) []measure.Dialled { return []measure.Dialled{measure.ServicePort(svc, 80)} },
	Measure: func(ctx context.Context, svc *corev1.Service, run *evidence.Run) {
		per := measure.FromEveryClient(ctx, suite.cluster, suite.clients, workload.Addr(svc, 80), workload.Quick, run)
		if per == nil {
			return
		}
		// The distinct peer addresses the backends saw, per client node, and the replies whose
		// peer is not the client pod's own address.
		podIP := map[string]string{}
		for _, c := range suite.clients {
			podIP[c.Spec.NodeName] = c.Status.PodIP
		}
		seen := map[string]bool{}
		notClient := 0
		for node, rs := range per {
			for _, r := range rs {
				if r.Reply != nil {
					host, _, _ := net.SplitHostPort(r.Reply.Peer)
					seen[host+" (client on "+node+")"] = true
					if host != podIP[node] {
						notClient++
					}
				}
			}
		}
		run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts && notClient == 0
		run.MetRed = run.Attempts > 0 && run.Replies == 0 && run.ProxyClosed == run.Attempts
		run.Summary = run.Counts()
		if len(seen) > 0 {
			peers := slices.Sorted(maps.Keys(seen))
			run.Notes = append(run.Notes, "peers the backends saw: "+strings.Join(peers, ", "))
		}
		if notClient > 0 {
			run.Notes = append(run.Notes, fmt.Sprintf("%d replies came from a peer other than the client pod's address", notClient))
		}
	},
})
