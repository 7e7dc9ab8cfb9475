package e2e

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// itp-local: only same-node endpoints; a node without one refuses.
var _ = leg.Define(legs, leg.Leg[*workload.Pinned]{
	Name:      "itp-local",
	Needs:     leg.Needs{Workers: 2},
	Early:     true,
	Workloads: "Service itp (internalTrafficPolicy Local, one echo backend per worker, cut); clients on every node",
	Exercises: "internal/translate/endpoints.go (SelectEndpoints: this node's endpoints only, an empty cluster elsewhere); the refusal path of " +
		"refuse-no-endpoints",
	Setup:     "internalTrafficPolicy Local, one echo backend on each worker, none on the control plane; kube-proxy ClusterIP entries deleted",
	RedExpect: "no backend reply from any node",
	GreenMeans: "clients on a worker reach only their own node's backend; the client on the control plane is refused (no-endpoints): " +
		"its node's agent counts each refusal and logs a record of it",
	Chance: fmt.Sprintf("nothing statistical: each node's proxy holds only its own node's endpoint (none on the control plane), so where a reply comes from is decided, not drawn; "+
		"every worker attempt must succeed within %s (workload.AttemptTimeout)", workload.AttemptTimeout),
	Prepare: func(ctx context.Context) (*workload.Pinned, error) {
		return workload.DeployPinned(ctx, suite.cluster, suite.legsNS, "itp", cluster.NodeNames(suite.cluster.Workers()),
			workload.ServiceOptions{Cut: true, Mutate: internalTrafficPolicyLocal})
	},
	// The per-node evidence checks the refusals: on the control plane the
	// agent counts each proxy-closed attempt no-endpoints, elsewhere none.
	Services: func(p *workload.Pinned) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(p.Service, 80).Refused(agent.ReasonNoEndpoints)}
	},
	Measure: func(ctx context.Context, p *workload.Pinned, run *evidence.Run) {
		per := measure.FromEveryClient(ctx, suite.cluster, suite.clients, p.To, workload.Quick, run)
		if per == nil {
			return
		}
		ok, wrong, refused := true, 0, 0
		for node, rs := range per {
			local := slices.Contains(p.Nodes, node)
			for _, r := range rs {
				switch {
				case local && (r.Reply == nil || r.Reply.Node != node):
					ok = false
					if r.Reply != nil {
						wrong++
					}
				case !local && r.Reply == nil && echo.Outcome(r) == echo.OutcomeProxyClosed:
					refused++
				case !local:
					ok = false
				}
			}
		}
		run.MetGreen = ok && run.Attempts > 0
		run.MetRed = run.Attempts > 0 && run.Replies == 0
		run.Summary = fmt.Sprintf("%s; %d replies from another node; %d attempts closed by the proxy on the node without a backend",
			run.Counts(), wrong, refused)
	},
})

// internalTrafficPolicyLocal sets the Service field the leg is about.
func internalTrafficPolicyLocal(s *corev1.Service) {
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
}
