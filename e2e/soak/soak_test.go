package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/images"
)

var (
	cfg     Config
	cfgErr  error
	testEnv env.Environment
	// rec is what the run records; the setup env funcs add their phases.
	rec = &Record{Started: time.Now()}
	// connected is the cluster the setup connected to.
	connected *cluster.Cluster
	// prog is the run's progress: on stderr, and in the artifacts once TestMain knows them.
	prog = kit.NewProgress("soak", time.Now(), "")
)

func TestMain(m *testing.M) {
	repo, _ := filepath.Abs("../..")
	cfg, cfgErr = LoadConfig(repo)
	rec.Started = cfg.Start
	if !cfg.Enabled || cfgErr != nil {
		os.Exit(m.Run())
	}
	prog = kit.NewProgress("soak", rec.Started, cfg.Artifacts)
	testEnv = env.NewWithKubeConfig(cfg.Kubeconfig)
	// Before any manifest is built: every builder takes the project's images from here.
	images.Use(cfg.Images)
	g := guard.Defaults()
	testEnv.Setup(
		timed("setup: connect", cluster.Connect(cfg.Cluster)),
		timed("setup: run lock", cluster.HoldRun(cluster.RunHolder("soak"), prog.Printf)),
		// Before anything reads a node, as the legs choose: docker exec on kind, else the
		// node-access DaemonSet (SVCLB_NODE_ACCESS forces one), deleted at the end.
		timed("setup: node access", cluster.SetupNodeAccess(cluster.NodeAccessOptions{Want: cfg.NodeAccess,
			Log: prog.Printf})),
		// Before the node DaemonSet's deploy, which renders the agent's
		// ConfigMap with both phases off: what the run found is what it
		// puts back.
		timed("setup: read the agent's config and the node pods", recordFound),
		timed("setup: deploy guard", guard.Deploy(g)),
		timed("setup: deploy node DaemonSet", agent.Deploy(agent.Options{Proxy: cfg.Proxy, EnvoyImage: cfg.EnvoyImage})),
		timed("setup: namespace "+Namespace, cluster.CreateNamespace(Namespace)),
	)
	testEnv.Finish(cluster.TeardownNodeAccess(), cluster.ReleaseRun())
	os.Exit(testEnv.Run(m))
}

// timed records an env func as a phase and keeps the connected cluster.
func timed(name string, f env.Func) env.Func {
	return func(ctx context.Context, c *envconf.Config) (context.Context, error) {
		d, err := prog.Step(name, func() (err error) {
			ctx, err = f(ctx, c)
			return err
		})
		rec.Phases = append(rec.Phases, Phase{Name: name, Took: d})
		if cl, cerr := cluster.From(ctx); cerr == nil {
			connected = cl
		}
		if err != nil {
			rec.Errors = append(rec.Errors, err.Error())
			_ = Write(cfg.Artifacts, rec, time.Since(rec.Started))
		}
		return ctx, err
	}
}

// recordFound records the agent's ConfigMap and the node pods that are not
// Ready as the run found them.
func recordFound(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	c, err := cluster.From(ctx)
	if err != nil {
		return ctx, err
	}
	rec.Env.AgentConfigBefore, err = agentConfig(ctx, c)
	switch {
	case apierrors.IsNotFound(err):
		// A cluster without the node DaemonSet yet: Run records, and puts
		// back, the ConfigMap the deploy below renders.
		rec.Env.AgentConfigBefore = nil
	case err != nil:
		return ctx, err
	}
	rec.Env.NotReadyBefore, err = notReadyPods(ctx, c)
	return ctx, err
}

// TestSoak is `make soak`: steady meshed traffic on the kind cluster while
// the faults of SOAK_FAULTS run (docs/soak.md); on another cluster, those
// that only kind allows are skipped, saying why (runnable).
func TestSoak(t *testing.T) {
	if cfgErr != nil {
		t.Fatal(cfgErr)
	}
	if !cfg.Enabled {
		t.Skip("the soak needs the kind cluster: run `make soak` (or set SVCLB_SOAK=1 against a running cluster)")
	}
	if connected == nil {
		t.Fatal("the setup did not connect to the cluster")
	}
	ctx := t.Context()
	err := Run(ctx, connected, cfg, rec, prog)
	if err != nil {
		rec.Errors = append(rec.Errors, err.Error())
	}
	Analyze(rec)
	if werr := Write(cfg.Artifacts, rec, time.Since(rec.Started)); werr != nil {
		t.Errorf("writing the report: %v", werr)
	}
	if md, rerr := os.ReadFile(filepath.Join(cfg.Artifacts, "report.md")); rerr == nil {
		fmt.Fprintf(os.Stderr, "\n%s\n", md)
	}
	if !rec.Verdict.Pass {
		t.Fatalf("soak failed: %d reasons, first: %s (report: %s)", len(rec.Verdict.Reasons), rec.Verdict.Reasons[0], filepath.Join(cfg.Artifacts, "report.md"))
	}
}
