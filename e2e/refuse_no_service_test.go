package e2e

import (
	"context"
	"net"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
)

// refuse-no-service: an address of the Service range no Service holds is
// refused and counted as no-service.
var _ = leg.Define(legs, refuseLeg(agent.ReasonNoService, leg.Leg[measure.Target]{
	Name:      "refuse-no-service",
	Setup:     "an address in the Service range that no Service holds",
	Workloads: "no Service: the highest free address of the ServiceCIDRs, port 80",
	Exercises: "as refuse-no-endpoints; pkg/svcindex/index.go and ranges.go (Lookup: no-service inside the ServiceCIDR range)",
	Prepare: func(ctx context.Context) (measure.Target, error) {
		ip, err := suite.cluster.UnallocatedServiceIP(ctx)
		if err != nil {
			return measure.Target{}, err
		}
		return measure.Target{To: net.JoinHostPort(ip.String(), "80")}, nil
	},
}))
