package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/e2e/internal/measure"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// itp-local: only same-node endpoints; a node without one refuses.
var _ = defineLeg(leg[*workload.Pinned]{
	name:       "itp-local",
	setup:      "internalTrafficPolicy Local, one echo backend on each worker, none on the control plane; kube-proxy objects deleted",
	redExpect:  "no backend reply from any node",
	greenMeans: "clients on a worker reach only their own node's backend; the client on the control plane is refused (no-endpoints)",
	prepare: func(ctx context.Context) (*workload.Pinned, error) {
		return workload.DeployPinned(ctx, suite.cluster, suite.legsNS, "itp", cluster.NodeNames(suite.cluster.Workers()),
			workload.ServiceOptions{Cut: true, Mutate: internalTrafficPolicyLocal})
	},
	measure: func(ctx context.Context, p *workload.Pinned, run *evidence.Run) {
		before, err := agent.Refusals(ctx, suite.cluster, p.Service.Namespace, p.Service.Name)
		if err != nil {
			run.Error = err.Error()
			return
		}
		per := measure.FromEveryClient(ctx, suite.cluster, suite.clients, p.To, workload.Quick, run)
		if per == nil {
			return
		}
		ok, wrong, expectRefused := true, 0, 0
		for node, rs := range per {
			local := slices.Contains(p.Nodes, node)
			for _, r := range rs {
				switch {
				case local && (r.Reply == nil || r.Reply.Node != node):
					ok = false
					if r.Reply != nil {
						wrong++
					}
				case !local:
					expectRefused++
					if r.Reply != nil || echo.Outcome(r) != echo.OutcomeProxyClosed {
						ok = false
					}
				}
			}
		}
		// The refusal counter follows the access log stream: give it up to
		// 2 s to reach the refusals expected (a red run waits all of it).
		// Reads use the leg's ctx: one in flight at 2 s must complete.
		var after map[string]float64
		var scrapeErr error
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
			if after, scrapeErr = agent.Refusals(ctx, suite.cluster, p.Service.Namespace, p.Service.Name); scrapeErr != nil {
				return false, scrapeErr
			}
			return after[agent.ReasonNoEndpoints]-before[agent.ReasonNoEndpoints] >= float64(expectRefused), nil
		})
		if scrapeErr != nil || after == nil {
			run.Error = fmt.Sprintf("agent refusal counters: %v", scrapeErr)
			return
		}
		refused := after[agent.ReasonNoEndpoints] - before[agent.ReasonNoEndpoints]
		run.Counters = map[string]float64{fmt.Sprintf(`%s{reason=%q,service=%q}`, agent.RefusedMetric, agent.ReasonNoEndpoints, p.Service.Name): refused}
		run.MetGreen = ok && run.Attempts > 0 && refused == float64(expectRefused)
		run.MetRed = run.Attempts > 0 && run.Replies == 0
		run.Summary = fmt.Sprintf("%s; %d replies from another node; %s +%g (want +%d from the node without a backend)",
			run.Counts(), wrong, agent.ReasonNoEndpoints, refused, expectRefused)
	},
})

// internalTrafficPolicyLocal sets the Service field the leg is about.
func internalTrafficPolicyLocal(s *corev1.Service) {
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
}
