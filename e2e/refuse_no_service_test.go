package e2e

import (
	"context"
	"net"

	"github.com/aether-mesh/svclb/e2e/internal/measure"
	"github.com/aether-mesh/svclb/fixtures/agent"
)

// refuse-no-service: an address of the Service range no Service holds is
// refused and counted as no-service.
var _ = defineLeg(refuseLeg("refuse-no-service", agent.ReasonNoService,
	"an address in the Service range that no Service holds",
	func(ctx context.Context) (measure.Target, error) {
		ip, err := suite.cluster.UnallocatedServiceIP(ctx)
		if err != nil {
			return measure.Target{}, err
		}
		return measure.Target{To: net.JoinHostPort(ip.String(), "80")}, nil
	}))
