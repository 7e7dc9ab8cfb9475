package e2e

import (
	"context"
	"net"

	"github.com/aether-mesh/svclb/e2e/internal/measure"
	"github.com/aether-mesh/svclb/fixtures/agent"
)

// refuse-no-service: an address of the Service range no Service holds is
// refused and counted as no-service.
var _ = defineLeg(refuseLeg(agent.ReasonNoService, leg[measure.Target]{
	name:      "refuse-no-service",
	setup:     "an address in the Service range that no Service holds",
	workloads: "no Service: the highest free address of the ServiceCIDRs, port 80",
	exercises: "as refuse-no-endpoints; pkg/svcindex/index.go and ranges.go (Lookup: no-service inside the ServiceCIDR range)",
	prepare: func(ctx context.Context) (measure.Target, error) {
		ip, err := suite.cluster.UnallocatedServiceIP(ctx)
		if err != nil {
			return measure.Target{}, err
		}
		return measure.Target{To: net.JoinHostPort(ip.String(), "80")}, nil
	},
}))
