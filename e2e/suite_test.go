package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/diagnostics"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// config is read from the environment (e2e/run.sh sets it) so that make and
// CI drive the suite without Ginkgo-specific flags.
type config struct {
	kit.Suite
	proxyChoice string // why that proxy, for the report
	envoyImage  string
	kindVersion string
	envoyVer    string
	keep        bool  // keep the legs' namespace after the run (KEEP_CLUSTER=1)
	err         error // the first variable that did not parse
}

func loadConfig() config {
	repo, _ := filepath.Abs("..")
	var e kit.Env
	c := config{
		// make passes the time it started so progress lines count from there.
		Suite:       e.Suite(repo, kit.SuiteVars{On: "SVCLB_E2E", Artifacts: "SVCLB_ARTIFACTS", ArtifactsDir: "_artifacts", Start: "SVCLB_E2E_START"}),
		proxyChoice: e.String("SVCLB_PROXY_CHOICE", ""),
		envoyImage:  e.String("SVCLB_ENVOY_IMAGE", ""),
		kindVersion: e.String("SVCLB_KIND_VERSION", "unknown"),
		envoyVer:    e.String("SVCLB_ENVOY_VERSION", "unknown"),
		keep:        e.On("KEEP_CLUSTER"),
	}
	c.err = e.Err()
	return c
}

var (
	cfg     config
	testEnv env.Environment
	// suite is what the env funcs set up; the legs read it.
	suite *state
)

// state is what the setup env funcs leave for the legs.
type state struct {
	cluster  *cluster.Cluster
	evidence evidence.Dir
	// legsNS is the namespace of the legs' workloads.
	legsNS string
	// clients holds one ready meshed client pod per node.
	clients []corev1.Pod
}

// clientOn is the meshed client on node (nil when there is none).
func (s *state) clientOn(node string) *corev1.Pod {
	for i := range s.clients {
		if s.clients[i].Spec.NodeName == node {
			return &s.clients[i]
		}
	}
	return nil
}

// prog is the suite's progress: on stderr, and in the artifacts once TestMain knows them.
var prog = kit.NewProgress("e2e", time.Now(), "")

// progress prints one line with the elapsed time since make started: long
// steps must show they are alive.
func progress(format string, args ...any) { prog.Printf(format, args...) }

func TestMain(m *testing.M) {
	cfg = loadConfig()
	if !cfg.Enabled {
		os.Exit(m.Run()) // TestE2E skips
	}
	if cfg.err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", cfg.err)
		os.Exit(2)
	}
	prog = kit.NewProgress("e2e", cfg.Start, cfg.Artifacts)
	// Before any manifest is built: every builder takes the project's images from here.
	images.Use(cfg.Images)
	progress("images: %s", cfg.Images)
	suite = &state{evidence: evidence.Dir(cfg.Artifacts), legsNS: "svclb-e2e"}
	// First, so that even a run whose setup fails lists its legs in order.
	if err := suite.evidence.WriteOrder(legOrder); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: recording the legs' order: %v\n", err)
		os.Exit(1)
	}
	testEnv = env.NewWithKubeConfig(cfg.Kubeconfig)
	testEnv.Setup(setupFuncs()...)
	testEnv.Finish(step("finish: cleanup", cleanup), step("finish: release the run lock", cluster.ReleaseRun()))
	os.Exit(testEnv.Run(m))
}

func TestE2E(t *testing.T) {
	if !cfg.Enabled {
		t.Skip("the acceptance legs need the kind cluster: run `make e2e-svc` (or set SVCLB_E2E=1 against a running cluster)")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "svclb acceptance legs")
}

var _ = ReportAfterEach(func(ctx SpecContext, r SpecReport) {
	if r.Failed() {
		dumpDiagnostics(ctx, "spec failed", r.FullText())
	}
})

// dumpDiagnostics writes the framework's diagnostics into
// failures/<what>/ of the artifacts.
func dumpDiagnostics(ctx context.Context, why, what string) {
	if suite == nil || suite.cluster == nil {
		return
	}
	dir := filepath.Join(cfg.Artifacts, "failures", sanitize(what))
	progress("%s: dumping diagnostics to %s", why, dir)
	if err := diagnostics.Dump(ctx, suite.cluster, dir, contract.Namespace, suite.legsNS); err != nil {
		progress("dump: %v", err)
	}
}

// setupFuncs is the suite's setup, composed from the framework's env funcs.
func setupFuncs() []env.Func {
	g := guard.Defaults()
	return []env.Func{
		step("setup: connect", cluster.Connect(cfg.Cluster)),
		// Before anything changes: one run at a time flips the agent's flags and the guard's cuts.
		step("setup: run lock", cluster.HoldRun(cluster.RunHolder("e2e"), progress)),
		// Before anything reads a node: docker exec on kind, else the node-access DaemonSet.
		step("setup: node access", cluster.SetupNodeAccess(cluster.NodeAccessOptions{Want: cfg.NodeAccess, Log: progress})),
		step("setup: record environment", recordEnv),
		step("setup: deploy guard", guard.Deploy(g)),
		step("setup: deploy node DaemonSet", deployNode),
		step("setup: legs namespace", cluster.CreateNamespace(suite.legsNS)),
		step("setup: meshed clients", meshedClients),
	}
}

// step wraps an env func with progress, timing and, on failure, a dump. It
// keeps the Cluster cluster.Connect stored in the context for the legs.
func step(name string, f env.Func) env.Func {
	return func(ctx context.Context, c *envconf.Config) (context.Context, error) {
		d, err := prog.Step(name, func() (err error) {
			ctx, err = f(ctx, c)
			return err
		})
		if cl, cerr := cluster.From(ctx); cerr == nil {
			suite.cluster = cl
		}
		_ = suite.evidence.AddPhase(name, d)
		if err != nil {
			_ = suite.evidence.WriteFailure(err.Error())
			dumpDiagnostics(ctx, name+" failed", name)
		}
		return ctx, err
	}
}

var modeRe = regexp.MustCompile(`(?m)^mode:\s*"?([a-z]*)"?`)

// recordEnv writes env.json and refuses a kube-proxy not in nftables mode:
// the guard cuts nftables objects only.
func recordEnv(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	cs := suite.cluster.CS
	e := &evidence.Env{
		Proxy:        cfg.Proxy,
		ProxyChoice:  cfg.proxyChoice,
		KindVersion:  cfg.kindVersion,
		EnvoyVersion: "n/a (built-in proxy)",
		Started:      cfg.Start,
	}
	if cfg.Proxy == manifests.ProxyEnvoy {
		e.EnvoyVersion = cfg.envoyVer
	}
	for _, n := range suite.cluster.Nodes {
		e.Nodes = append(e.Nodes, evidence.Node{Name: n.Name, Zone: n.Zone, IP: n.InternalIP})
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return ctx, fmt.Errorf("server version: %w", err)
	}
	e.KubernetesVersion = v.GitVersion
	if cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{}); err == nil {
		if m := modeRe.FindStringSubmatch(cm.Data["config.conf"]); m != nil {
			e.KubeProxyMode = m[1]
		}
	}
	if e.KubeProxyMode != "nftables" {
		return ctx, fmt.Errorf("kube-proxy mode is %q: the legs need nftables mode (kindconfig sets it)", e.KubeProxyMode)
	}
	progress("cluster %s: Kubernetes %s, %d nodes, kube-proxy %s, proxy %s", cfg.Cluster, e.KubernetesVersion, len(e.Nodes), e.KubeProxyMode, e.Proxy)
	return ctx, suite.evidence.WriteEnv(e)
}

// deployNode deploys the node DaemonSet and shows what each agent reports.
func deployNode(ctx context.Context, c *envconf.Config) (context.Context, error) {
	ctx, err := agent.Deploy(agent.Options{Proxy: cfg.Proxy, EnvoyImage: cfg.envoyImage})(ctx, c)
	if err != nil {
		return ctx, err
	}
	sts, err := agent.Statuses(ctx, suite.cluster)
	for node, s := range sts {
		progress("agent on %s: phase1=%v phase2=%v cds=%s snapshot %d", node, s.Phase1, s.Phase2, s.CDS, s.SnapshotVersion)
	}
	return ctx, err
}

// meshedClients starts one meshed client per schedulable node; most legs dial from all. A
// tainted or cordoned node gets none: the clients are pinned by nodeName, which would bypass
// the taint an operator set.
// A client a kept cluster left running keeps the binary of the echo image
// it started from, without the subcommands a newer tree's legs use
// (lookup, tls, until-reply): a client whose image digest is not the one
// its node holds now (make e2e-svc has just loaded it) is recreated.
func meshedClients(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	var stale []*corev1.Pod
	nodes := suite.cluster.Schedulable()
	if len(nodes) == 0 {
		return ctx, fmt.Errorf("no schedulable node for the meshed clients (every node is tainted NoSchedule/NoExecute or cordoned)")
	}
	for _, n := range nodes {
		p, err := workload.MeshedClient(suite.legsNS, "client-"+n.Name, n.Name, "client")
		if err != nil {
			return ctx, err
		}
		want, err := suite.cluster.NodeImageDigest(ctx, n.Name, p.Spec.Containers[0].Image)
		if err != nil {
			return ctx, err
		}
		got, err := suite.cluster.CS.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return ctx, err
		case cluster.PodImageDigest(got, workload.ClientContainer) == want:
			continue
		default:
			progress("setup: client %s runs %s, its node holds %s: recreating it", p.Name, cluster.PodImageDigest(got, workload.ClientContainer), want)
		}
		stale = append(stale, p)
	}
	if len(stale) > 0 {
		if _, err := workload.Recreate(ctx, suite.cluster, stale...); err != nil {
			return ctx, err
		}
	}
	pods, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.RoleLabel+"=client", len(nodes), 3*time.Minute)
	if err != nil {
		return ctx, err
	}
	suite.clients = pods
	return ctx, nil
}

// cleanup deletes the legs' namespace and the node-access DaemonSet (root on
// every node; there only in daemonset mode) unless KEEP_CLUSTER=1. The agent's
// flags stay as the last leg left them (on), as a user of the cluster would
// expect after a run.
func cleanup(ctx context.Context, c *envconf.Config) (context.Context, error) {
	if cfg.keep {
		progress("cleanup: KEEP_CLUSTER=1: leaving namespace %s and the infrastructure in place", suite.legsNS)
		return ctx, nil
	}
	if _, err := cluster.TeardownNodeAccess()(ctx, c); err != nil {
		return ctx, err
	}
	return cluster.DeleteNamespace(suite.legsNS)(ctx, c)
}
