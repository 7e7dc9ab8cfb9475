package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// passthrough: traffic outside the Service range goes through the proxy's
// passthrough unchanged, whatever the Phase flags.
var _ = leg.Define(legs, leg.Leg[string]{
	Name:       "passthrough",
	Early:      true,
	Control:    true,
	Workloads:  "echo Deployment pass (1 pod, no Service); clients dial its pod IP:8080",
	Exercises:  "internal/translate/listener.go (default_filter_chain cap_passthrough, PassthroughOriginalDst)",
	Setup:      "a meshed client dials an echo pod's own IP:8080 (outside the Service range)",
	RedExpect:  "same as green: the Phase flags do not touch traffic outside the Service range (control leg)",
	GreenMeans: "every attempt reaches the pod, and the pod sees the node's address as peer (the proxy's passthrough carried it, not a direct connection)",
	Chance:     allSucceed,
	// The proxy's default chain must carry every attempt in both runs.
	Services: func(to string) []measure.Dialled { return []measure.Dialled{{To: to, OutsideRange: true}} },
	Prepare: func(ctx context.Context) (string, error) {
		dep := workload.EchoDeployment(suite.legsNS, "pass", workload.Backends{Replicas: 1})
		if err := suite.cluster.Create(ctx, dep); err != nil {
			return "", err
		}
		pods, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=pass", 1, 2*time.Minute)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(pods[0].Status.PodIP, strconv.Itoa(workload.EchoPort)), nil
	},
	Measure: func(ctx context.Context, to string, run *evidence.Run) {
		per := measure.FromEveryClient(ctx, suite.cluster, suite.clients, to, workload.Quick, run)
		if per == nil {
			return
		}
		direct := 0
		for _, c := range suite.clients {
			for _, r := range per[c.Spec.NodeName] {
				if r.Reply != nil {
					if host, _, _ := net.SplitHostPort(r.Reply.Peer); host == c.Status.PodIP {
						direct++
					}
				}
			}
		}
		run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts && direct == 0
		run.MetRed = run.MetGreen
		run.Summary = fmt.Sprintf("%s; %d replies saw the client pod's own address (not captured)", run.Counts(), direct)
	},
})
