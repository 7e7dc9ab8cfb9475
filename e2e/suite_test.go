package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/env"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/e2e/internal/kube"
)

// config is read from the environment so that make (and CI) drive the suite
// without Ginkgo-specific flags.
type config struct {
	enabled    bool
	kubeconfig string
	cluster    string // kind cluster name
	artifacts  string
	proxy      string // "envoy" or "builtin"
	keep       bool   // keep the legs' namespaces after the run (KEEP_CLUSTER=1)
	start      time.Time
}

func loadConfig() config {
	repo, _ := filepath.Abs("..")
	c := config{
		enabled:    os.Getenv("SVCLB_E2E") == "1",
		kubeconfig: getenv("SVCLB_KUBECONFIG", filepath.Join(repo, "_output", "kubeconfig")),
		cluster:    getenv("SVCLB_CLUSTER", "svclb"),
		artifacts:  getenv("SVCLB_ARTIFACTS", filepath.Join(repo, "_artifacts")),
		proxy:      getenv("SVCLB_PROXY", "builtin"),
		keep:       os.Getenv("KEEP_CLUSTER") == "1",
		start:      time.Now(),
	}
	// make passes the time it started so progress lines count from there.
	if s, err := strconv.ParseInt(os.Getenv("SVCLB_E2E_START"), 10, 64); err == nil && s > 0 {
		c.start = time.Unix(s, 0)
	}
	return c
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

var (
	cfg     config
	testEnv env.Environment
	// suite is what the env funcs set up; the legs read it.
	suite *state
)

// state is what the setup env funcs leave for the legs.
type state struct {
	cluster  *kube.Cluster
	evidence evidence.Dir
	nodes    []evidence.Node
	// legsNS is the namespace of the legs' workloads.
	legsNS string
	// clients holds one ready meshed client pod per node.
	clients []corev1.Pod
}

// progress prints one line with the elapsed time since make started: long
// steps must show they are alive.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[e2e %7.1fs] %s\n", time.Since(cfg.start).Seconds(), fmt.Sprintf(format, args...))
}

func TestMain(m *testing.M) {
	cfg = loadConfig()
	if !cfg.enabled {
		os.Exit(m.Run()) // TestE2E skips
	}
	suite = &state{evidence: evidence.Dir(cfg.artifacts), legsNS: "svclb-e2e"}
	testEnv = env.NewWithKubeConfig(cfg.kubeconfig)
	testEnv.Setup(setupFuncs()...)
	testEnv.Finish(finishFuncs()...)
	os.Exit(testEnv.Run(m))
}

func TestE2E(t *testing.T) {
	if !cfg.enabled {
		t.Skip("the acceptance legs need the kind cluster: run `make e2e-svc` (or set SVCLB_E2E=1 against a running cluster)")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "svclb acceptance legs")
}

var _ = ReportAfterEach(func(ctx SpecContext, r SpecReport) {
	if !r.Failed() {
		return
	}
	dir := filepath.Join(cfg.artifacts, "failures", sanitize(r.FullText()))
	progress("spec failed: dumping diagnostics to %s", dir)
	dumpDiagnostics(ctx, dir)
})
