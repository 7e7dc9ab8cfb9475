package legsuite

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// State is what the suite's setup leaves for the legs (suite_test.go sets
// it); the legs read it when they run, never when they are declared.
var State struct {
	Cluster  *cluster.Cluster
	Evidence evidence.Dir
	// Namespace holds the legs' workloads; Clients are one meshed client
	// pod per node.
	Namespace string
	Clients   []corev1.Pod
}

// Legs are this suite's legs.
var Legs = leg.NewSuite(func() leg.Config {
	return leg.Config{Cluster: State.Cluster, Evidence: State.Evidence}
})

// Order is the order the legs run in: every leg once.
var Order = []string{"example-reach"}

// Reach: a meshed pod on every node reaches a ClusterIP Service whose
// kube-proxy entries the guard cut, once the agent's Phase flags are on.
var Reach = leg.Leg[*corev1.Service]{
	Name:       "example-reach",
	Needs:      leg.Needs{Workers: 1},
	Workloads:  "Service example-reach (2 echo backends, cut); the meshed client on every node",
	Setup:      "ClusterIP Service with 2 echo backends, its kube-proxy ClusterIP entries cut on every node; a meshed client on every node",
	RedExpect:  "no backend reply: the capture passes the VIP through to kube-proxy's cut entries, the proxy closes the connection",
	GreenMeans: "every attempt from every meshed client gets a backend's reply, through its node's proxy",
	Chance:     "nothing statistical: every attempt must succeed within workload.AttemptTimeout",
	Prepare: func(ctx context.Context) (*corev1.Service, error) {
		return workload.DeployEcho(ctx, State.Cluster, State.Namespace, "example-reach", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true})
	},
	Services: func(svc *corev1.Service) []measure.Dialled { return []measure.Dialled{measure.ServicePort(svc, 80)} },
	Measure: func(ctx context.Context, svc *corev1.Service, run *evidence.Run) {
		if measure.FromEveryClient(ctx, State.Cluster, State.Clients, workload.Addr(svc, 80), workload.Quick, run) == nil {
			return
		}
		// From what was seen, never from the mode: red is judged by green's condition too.
		run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts
		run.MetRed = run.Attempts > 0 && run.Replies == 0 && run.ProxyClosed == run.Attempts
		run.Summary = run.Counts()
	},
}

var _ = leg.Define(Legs, Reach)

// init puts the legs into the Ginkgo tree in Order: every leg.Define above
// has run by now (package variables come before init functions).
func init() {
	if err := Legs.Order(Order); err != nil {
		panic(err)
	}
}
