package e2e

import (
	"context"
	"time"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// refuse-no-endpoints: a Service without endpoints is refused by the proxy
// and counted with the Service's name.
var _ = leg.Define(legs, refuseLeg(agent.ReasonNoEndpoints, leg.Leg[measure.Target]{
	Name:      "refuse-no-endpoints",
	Early:     true,
	Setup:     "ClusterIP Service whose selector matches no pod, kube-proxy ClusterIP entries deleted on every node",
	Workloads: "Service noep (selects nothing, cut); 5 attempts per client, all at once",
	Exercises: "internal/translate/listener.go (cap_svc access log on UH/NC, gRPC ALS), nodeproxy/als.go, agent/internal/xdsserver/server.go " +
		"(Classify, svclb_svc_refused_total), fixtures/measure",
	Prepare: func(ctx context.Context) (measure.Target, error) {
		svc := workload.Service(suite.legsNS, "noep", workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: "nothing-matches-this"}, Cut: true})
		if err := suite.cluster.Create(ctx, svc); err != nil {
			return measure.Target{}, err
		}
		if _, err := guard.WaitCut(ctx, suite.cluster, svc, time.Minute); err != nil {
			return measure.Target{}, err
		}
		return measure.Target{To: workload.Addr(svc, 80), Namespace: svc.Namespace, Service: svc.Name}, nil
	},
}))
