package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// topology: PreferClose keeps a client in its zone while the zone has an
// endpoint and spills to other zones when it has none.
var _ = leg.Define(legs, leg.Leg[*workload.Pinned]{
	Name:      "topology",
	Needs:     leg.Needs{Workers: 2, Zones: 3},
	Early:     true,
	Workloads: "Service topo (trafficDistribution PreferClose, one echo backend in zone-a and one in zone-b, cut); clients on every node",
	Exercises: "internal/translate/endpoints.go (zone bands from hints or PreferClose), internal/translate/cluster.go (LoadAssignment localities), " +
		"nodeproxy/internal/lb/priority.go",
	Setup:      "trafficDistribution PreferClose, one echo backend in zone-a and one in zone-b (none in zone-c); kube-proxy ClusterIP entries deleted",
	RedExpect:  "no backend reply from any node",
	GreenMeans: "clients in zone-a and zone-b reach only their own zone; the client in zone-c (no endpoint) reaches the other zones",
	Chance: fmt.Sprintf("nothing statistical: a node's proxy holds its zone's endpoint in priority 0 and the others after it (overprovisioning_factor 10^7: "+
		"priority 0 takes all traffic while one of its hosts is usable), so a zone-a or zone-b client never draws another zone; the zone-c client only has other zones. "+
		"Every attempt must succeed within %s (workload.AttemptTimeout)", workload.AttemptTimeout),
	Services: func(p *workload.Pinned) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(p.Service, 80)}
	},
	Prepare: func(ctx context.Context) (*workload.Pinned, error) {
		return workload.DeployPinned(ctx, suite.cluster, suite.legsNS, "topo", cluster.NodeNames(suite.cluster.Workers()),
			workload.ServiceOptions{Cut: true, Mutate: preferClose})
	},
	Measure: func(ctx context.Context, p *workload.Pinned, run *evidence.Run) {
		per := measure.FromEveryClient(ctx, suite.cluster, suite.clients, p.To, workload.DialOptions{Count: 12, Interval: 30 * time.Millisecond, Timeout: workload.AttemptTimeout}, run)
		if per == nil {
			return
		}
		ok, crossZone, spill := true, 0, map[string]int{}
		for node, rs := range per {
			zone := suite.cluster.Zone(node)
			hasLocal := slices.Contains(p.Nodes, node)
			for _, r := range rs {
				if r.Reply == nil || !r.OK {
					ok = false
					continue
				}
				rz := suite.cluster.Zone(r.Reply.Node)
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
		if len(p.Nodes) > 0 && len(spill) == 0 {
			ok = false
		}
		run.MetGreen = ok && run.Attempts > 0
		run.MetRed = run.Attempts > 0 && run.Replies == 0
		run.Summary = fmt.Sprintf("%s; %d cross-zone replies where a same-zone endpoint exists; zone without endpoints reached %v", run.Counts(), crossZone, spill)
	},
})

// preferClose sets the Service field the leg is about.
func preferClose(s *corev1.Service) {
	s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
}
