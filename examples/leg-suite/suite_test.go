package legsuite

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// The acceptance run needs a kind cluster with svclb's images loaded (the
// svclb repository's `make cluster images`); without SVCLB_E2E=1 it skips.
var (
	enabled   = os.Getenv("SVCLB_E2E") == "1"
	testEnv   env.Environment
	artifacts = envOr("SVCLB_ARTIFACTS", "_artifacts")
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	if !enabled {
		os.Exit(m.Run())
	}
	State.Evidence, State.Namespace = evidence.Dir(artifacts), "svclb-example"
	if err := State.Evidence.WriteOrder(Order); err != nil {
		panic(err)
	}
	testEnv = env.NewWithKubeConfig(os.Getenv("KUBECONFIG"))
	testEnv.Setup(
		cluster.Connect(envOr("SVCLB_CLUSTER", "svclb")),
		keepCluster,
		cluster.SetupNodeAccess(cluster.NodeAccessOptions{}),
		guard.Deploy(guard.Defaults()),
		agent.Deploy(agent.Options{Proxy: manifests.ProxyBuiltin}),
		cluster.CreateNamespace(State.Namespace),
		meshedClients,
	)
	testEnv.Finish(cluster.TeardownNodeAccess(), cluster.DeleteNamespace(State.Namespace))
	os.Exit(testEnv.Run(m))
}

// keepCluster stores the Cluster cluster.Connect made for the legs.
func keepCluster(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	c, err := cluster.From(ctx)
	State.Cluster = c
	return ctx, err
}

// meshedClients starts one meshed client per node and waits until all are Ready.
func meshedClients(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	for _, n := range State.Cluster.Nodes {
		p, err := workload.MeshedClient(State.Namespace, "client-"+n.Name, n.Name, "client")
		if err != nil {
			return ctx, err
		}
		if err := State.Cluster.Create(ctx, p); err != nil {
			return ctx, err
		}
	}
	pods, err := State.Cluster.WaitPodsReady(ctx, State.Namespace, workload.RoleLabel+"=client", len(State.Cluster.Nodes), 3*time.Minute)
	State.Clients = pods
	return ctx, err
}

var _ = BeforeSuite(func() { Expect(Legs.StartEarly(GinkgoLabelFilter())).To(Succeed()) })

var _ = AfterSuite(func() { Legs.StopEarly() })

func TestLegs(t *testing.T) {
	if !enabled {
		t.Skip("the legs need a kind cluster with svclb's images: set SVCLB_E2E=1 (README.md)")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "svclb example legs")
}
