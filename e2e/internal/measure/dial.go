package measure

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// FromEveryClient dials to from every client in turn, tallies every result
// into run and returns them by the client's node. On an error it sets
// run.Error and returns nil: the run observed nothing it can be judged on.
func FromEveryClient(ctx context.Context, c *cluster.Cluster, clients []corev1.Pod, to string, o workload.DialOptions, run *evidence.Run) map[string][]echo.Result {
	per, err := workload.DialEach(ctx, c, clients, to, o)
	for _, rs := range per {
		run.Tally(rs, c.Zone)
	}
	if err != nil {
		run.Error = err.Error()
		return nil
	}
	return per
}
