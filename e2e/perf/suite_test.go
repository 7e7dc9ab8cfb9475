package perf

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/e2e/perf/internal/report"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// config is read from the environment (e2e/perf/run.sh sets it).
type config struct {
	kit.Suite
	clientImage string
	// changes is how many times the backend becomes ready (and as many
	// times goes away) in TestEndpointChange; scaleChanges at each size.
	changes, scaleChanges int
	// trials is how many Services TestNewService creates (and as many twins).
	trials int
	sizes  []int
	// createWithin bounds creating a size's objects (SVCLB_PERF_CREATE_WITHIN), so that a
	// run, creating and deleting included, ends within about 12 minutes. A size whose
	// objects take longer to create does not fit the cluster's host; the run says how far
	// it got.
	createWithin time.Duration
	// createRate paces creating a size's Services (SVCLB_PERF_CREATE_RATE, Services per
	// second, each with its EndpointSlice; 0: as fast as the apiserver takes them). Unpaced,
	// 5,000 saturate a 2-core cluster's apiserver and every node's work queues at once.
	createRate float64
	// restarts: TestScale restarts kube-proxy and the agent after programming.
	restarts bool
	// interval is the clients' spacing of attempt starts.
	interval time.Duration
	// data runs TestDataplane (SVCLB_PERF_DATA=1, make perf DATA=1): its
	// open loop makes dataConns connections at dataRate per second per path.
	data      bool
	dataRate  float64
	dataConns int
}

func loadConfig() (config, error) {
	repo, _ := filepath.Abs("../..")
	var e kit.Env
	c := config{
		Suite:        e.Suite(repo, kit.SuiteVars{On: "SVCLB_PERF", Artifacts: "SVCLB_PERF_ARTIFACTS", ArtifactsDir: "_artifacts/perf", Start: "SVCLB_PERF_START"}),
		clientImage:  e.String("SVCLB_PERF_CLIENT_IMAGE", ""),
		changes:      e.Count("SVCLB_PERF_CHANGES", 30),
		scaleChanges: e.Count("SVCLB_PERF_SCALE_CHANGES", 30),
		trials:       e.Count("SVCLB_PERF_TRIALS", 20),
		createWithin: e.Duration("SVCLB_PERF_CREATE_WITHIN", 6*time.Minute),
		createRate:   e.Float("SVCLB_PERF_CREATE_RATE", 0),
		restarts:     e.String("SVCLB_PERF_RESTARTS", "1") != "0",
		interval:     10 * time.Millisecond,
		data:         e.On("SVCLB_PERF_DATA"),
		dataRate:     e.Float("SVCLB_PERF_DATA_RATE", 200),
		dataConns:    e.Positive("SVCLB_PERF_DATA_CONNS", 10000),
	}
	if err := e.Err(); err != nil {
		return c, err
	}
	if c.clientImage == "" {
		c.clientImage = c.Images.Ref(contract.ImagePerfClient)
	}
	if c.createWithin <= 0 {
		c.createWithin = 6 * time.Minute
	}
	if !(c.createRate >= 0) || math.IsInf(c.createRate, 0) { // NaN fails >= too
		return c, fmt.Errorf("SVCLB_PERF_CREATE_RATE: %v is not a rate (Services per second, 0: unpaced)", c.createRate)
	}
	for _, s := range strings.FieldsFunc(e.String("SVCLB_PERF_SIZES", "1000,5000"), func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("SVCLB_PERF_SIZES: %q is not a positive size", s)
		}
		c.sizes = append(c.sizes, n)
	}
	return c, nil
}

var (
	cfg config
	// watchCtx is the run's: the EndpointSlice watch lives until cleanup.
	watchCtx, stopWatch = context.WithCancel(context.Background())
	// suite is what the setup leaves for the tests.
	suite = &state{}
)

// state is the cluster and the latency workload (latency.go).
type state struct {
	cluster *cluster.Cluster
	// foundConfig is the agent ConfigMap's keys as the run found them,
	// restored at the end.
	foundConfig map[string]string
	w           *latencyWorkload
}

// prog is the suite's progress: on stderr, and in the artifacts once TestMain knows them.
var prog = kit.NewProgress("perf", time.Now(), "")

// progress prints one line with the time since the run started.
func progress(format string, args ...any) { prog.Printf(format, args...) }

func TestMain(m *testing.M) {
	var err error
	if cfg, err = loadConfig(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !cfg.Enabled {
		os.Exit(m.Run()) // the cluster tests skip
	}
	prog = kit.NewProgress("perf", cfg.Start, cfg.Artifacts)
	images.Use(cfg.Images) // before any manifest is built
	e := env.NewWithKubeConfig(cfg.Kubeconfig)
	// Before any manifest is built: every builder takes the project's images from here.
	images.Use(cfg.Images)
	g := guard.Defaults()
	e.Setup(
		step("connect", cluster.Connect(cfg.Cluster)),
		step("run lock", cluster.HoldRun(cluster.RunHolder("perf"), progress)),
		// Before anything reads a node, as the legs choose: docker exec on kind, else the
		// node-access DaemonSet (SVCLB_NODE_ACCESS forces one), deleted at the end.
		step("node access", cluster.SetupNodeAccess(cluster.NodeAccessOptions{Want: cfg.NodeAccess,
			Log: progress})),
		step("record the agent's config", recordConfig),
		step("deploy guard", guard.Deploy(g)),
		step("deploy node DaemonSet", agent.Deploy(agent.Options{Proxy: cfg.Proxy, ProxyArgs: proxyArgs()})),
		step("agent phases on, proactive CDS", func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
			return ctx, agent.SetConfig(ctx, suite.cluster, onConfig)
		}),
		step("namespace "+namespace, cluster.CreateNamespace(namespace)),
		step("latency workload", func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
			w, err := deployWorkload(ctx, suite.cluster)
			suite.w = w
			return ctx, err
		}),
	)
	e.Finish(step("cleanup", cleanup), step("node access: delete", cluster.TeardownNodeAccess()), step("release the run lock", cluster.ReleaseRun()))
	os.Exit(e.Run(m))
}

// onConfig is what the measurements run with: the agent serves Services
// (Phase 1), refuses what has no backend (Phase 2), proactive CDS.
var onConfig = map[string]string{contract.KeyPhase1: "true", contract.KeyPhase2: "true", contract.KeyCDS: "proactive"}

// step wraps an env func with progress and keeps the Cluster that
// cluster.Connect stored.
func step(name string, f env.Func) env.Func {
	return func(ctx context.Context, c *envconf.Config) (context.Context, error) {
		_, err := prog.Step("setup: "+name, func() (err error) {
			ctx, err = f(ctx, c)
			return err
		})
		if cl, cerr := cluster.From(ctx); cerr == nil {
			suite.cluster = cl
		}
		return ctx, err
	}
}

// recordConfig keeps the agent ConfigMap's keys as found (deploying the
// node DaemonSet resets them to off): cleanup puts them back.
func recordConfig(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	cm, err := suite.cluster.CS.CoreV1().ConfigMaps(contract.Namespace).Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ctx, nil
	case err != nil:
		return ctx, err
	}
	suite.foundConfig = map[string]string{}
	for _, k := range []string{contract.KeyPhase1, contract.KeyPhase2, contract.KeyCDS} {
		if v, ok := cm.Data[k]; ok {
			suite.foundConfig[k] = v
		}
	}
	progress("the agent's config as found: %s", agent.Describe(suite.foundConfig))
	return ctx, nil
}

// cleanup deletes the namespace and waits until it is gone, puts the
// agent's config back, and renders the report from every result so far.
func cleanup(ctx context.Context, c *envconf.Config) (context.Context, error) {
	stopWatch()
	var errs []string
	if suite.cluster != nil {
		if err := deleteNamespace(ctx, suite.cluster, namespace); err != nil {
			errs = append(errs, err.Error())
		}
		if len(suite.foundConfig) > 0 {
			progress("restoring the agent's config: %s", agent.Describe(suite.foundConfig))
			if err := agent.SetConfig(ctx, suite.cluster, maps.Clone(suite.foundConfig)); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if err := report.Render(cfg.Artifacts); err != nil {
		errs = append(errs, "report: "+err.Error())
	} else {
		progress("report: %s", filepath.Join(cfg.Artifacts, "report.md"))
	}
	if len(errs) > 0 {
		return ctx, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return ctx, nil
}

// deleteNamespace deletes ns and waits until it is gone: the next run on
// the cluster starts without it.
func deleteNamespace(ctx context.Context, c *cluster.Cluster, ns string) error {
	t0 := time.Now()
	nss := c.CS.CoreV1().Namespaces()
	if err := nss.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := nss.Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone: %w", ns, err)
	}
	progress("namespace %s deleted in %s", ns, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// needCluster skips a test outside a perf run.
func needCluster(t *testing.T) {
	t.Helper()
	if !cfg.Enabled {
		t.Skip("the perf suite needs the kind cluster: make -f Makefile -f e2e/perf/perf.mk perf (or SVCLB_PERF=1 against a running cluster)")
	}
	if suite.w == nil {
		t.Fatal("the setup did not finish")
	}
}

// header starts a measurement's header: its start and the load now.
func header() result.Header {
	return result.Header{Started: time.Now(), LoadBefore: load(), Proxy: cfg.Proxy}
}

// finish closes a header: duration and the load now.
func finish(h *result.Header) {
	h.Duration = time.Since(h.Started)
	h.LoadAfter = load()
}

func load() result.Load {
	l, err := result.ReadLoad(runtime.NumCPU())
	if err != nil {
		progress("load: %v", err)
	}
	return l
}
