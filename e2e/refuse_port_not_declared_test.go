package e2e

import (
	"context"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// refuse-port-not-declared: a port the Service does not declare is refused
// and counted with the Service's name. The agent's refusal setting is close
// (the default), so the proxy accepts and closes; refuse-reset dials such a
// port with refusal: reset, where the SYN is reset in the client's netns.
var _ = leg.Define(legs, refuseLeg(agent.ReasonPortNotDeclared, leg.Leg[measure.Target]{
	Name:      "refuse-port-not-declared",
	Early:     true,
	Setup:     "ClusterIP Service with a backend on port 80, dialled on port 81 it does not declare; the agent's refusal: close (the default)",
	Workloads: "Service pnd (1 echo backend, port 80, cut), dialled on port 81",
	Exercises: "as refuse-no-endpoints; pkg/svcindex/index.go (Lookup: port-not-declared)",
	Prepare: func(ctx context.Context) (measure.Target, error) {
		svc, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "pnd", workload.Backends{Replicas: 1}, workload.ServiceOptions{Cut: true})
		if err != nil {
			return measure.Target{}, err
		}
		return measure.Target{To: workload.Addr(svc, 81), Namespace: svc.Namespace, Service: svc.Name}, nil
	},
}))
