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
	Workloads: "Service itp (internalTrafficPolicy Local, one echo backend on every client node but one, cut); clients on every schedulable node",
	Exercises: "internal/translate/endpoints.go (SelectEndpoints: this node's endpoints only, an empty cluster elsewhere); the refusal path of " +
		"refuse-no-endpoints",
	Setup: "internalTrafficPolicy Local, one echo backend on each schedulable node but one (the control plane where it takes pods, else the first by name); " +
		"kube-proxy ClusterIP entries deleted",
	RedExpect: "no backend reply from any node",
	GreenMeans: "clients on a node with a backend reach only their own node's; the client on the node without one is refused (no-endpoints): " +
		"its node's agent counts each refusal and logs a record of it",
	Chance: fmt.Sprintf("nothing statistical: each node's proxy holds only its own node's endpoint (none on the node without a backend), so where a reply comes from is decided, not drawn; "+
		"every attempt from a node with a backend must succeed within %s (workload.AttemptTimeout)", workload.AttemptTimeout),
	Prepare: func(ctx context.Context) (*workload.Pinned, error) {
		return workload.DeployPinned(ctx, suite.cluster, suite.legsNS, "itp", itpBackendNodes(),
			workload.ServiceOptions{Cut: true, Mutate: internalTrafficPolicyLocal})
	},
	// The per-node evidence checks the refusals: on the node without a backend
	// the agent counts each proxy-closed attempt no-endpoints, elsewhere none.
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
		// refused > 0: a run where every client had a backend would prove half the leg.
		run.MetGreen = ok && run.Attempts > 0 && refused > 0
		run.MetRed = run.Attempts > 0 && run.Replies == 0
		run.Summary = fmt.Sprintf("%s; %d replies from another node; %d attempts closed by the proxy on the node without a backend",
			run.Counts(), wrong, refused)
	},
})

// itpBackendNodes are the nodes that get a backend: every schedulable node (each has a client)
// but one, so that one client's node has no endpoint and must refuse. The one left out is the
// control plane where it takes pods (kindconfig/cluster.yaml), else the first by name: a
// tainted control plane has no client to refuse.
func itpBackendNodes() []string {
	nodes := suite.cluster.Schedulable()
	without := 0
	for i, n := range nodes {
		if n.ControlPlane {
			without = i
			break
		}
	}
	return cluster.NodeNames(slices.Delete(slices.Clone(nodes), without, without+1))
}

// internalTrafficPolicyLocal sets the Service field the leg is about.
func internalTrafficPolicyLocal(s *corev1.Service) {
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
}
