package suiterun

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Config is one run's settings: what e2e/run.sh passed the suite binary as environment and
// flags, in one place.
type Config struct {
	// Kubeconfig is the one file the suite reads (SVCLB_KUBECONFIG), with its current context.
	Kubeconfig string
	// Cluster is the kind cluster's name (SVCLB_CLUSTER): kind names the node containers after it.
	Cluster string
	// Artifacts is the evidence and reports directory (SVCLB_ARTIFACTS).
	Artifacts string
	// Proxy is builtin or envoy (SVCLB_PROXY); ProxyChoice says why, for the report.
	Proxy, ProxyChoice string
	// EnvoyImage and EnvoyVersion: the Envoy image the node DaemonSet runs (ProxyEnvoy).
	EnvoyImage, EnvoyVersion string
	// NodeAccess is how the suite reaches a node's root (SVCLB_NODE_ACCESS): docker, daemonset,
	// or empty to choose per cluster (fixtures/cluster ChooseNodeAccess).
	NodeAccess string
	// Registry is where the clusters pull the project's images from (SVCLB_REGISTRY,
	// fixtures/images); empty: kind-loaded.
	Registry string
	// KindVersion is recorded in the report.
	KindVersion string
	// Filter is the Ginkgo label filter (LabelFilter).
	Filter string
	// Keep leaves the legs' namespace after the run (KEEP_CLUSTER=1).
	Keep bool
	// Timeout bounds the suite binary (-test.timeout).
	Timeout time.Duration
	// Start is when the run began: the progress lines count from it (SVCLB_E2E_START).
	Start time.Time
}

// Proxies are the node proxies a run takes (manifests.ProxyBuiltin, manifests.ProxyEnvoy).
var Proxies = []string{"builtin", "envoy"}

// Validate refuses a setting the suite would misread.
func (c Config) Validate() error {
	if _, err := cluster.ParseNodeAccess(c.NodeAccess); err != nil {
		return fmt.Errorf("--node-access: %w", err)
	}
	if _, err := images.Parse(c.Registry); err != nil {
		return fmt.Errorf("--registry %q: %w", c.Registry, err)
	}
	switch {
	case c.Proxy != Proxies[0] && c.Proxy != Proxies[1]:
		return fmt.Errorf("--proxy %q: want builtin or envoy", c.Proxy)
	case c.Proxy == "envoy" && c.EnvoyImage == "":
		return fmt.Errorf("--proxy envoy needs --envoy-image")
	case c.Kubeconfig == "":
		return fmt.Errorf("no kubeconfig for the suite")
	case c.Artifacts == "":
		return fmt.Errorf("--artifacts is empty")
	case c.Timeout <= 0:
		return fmt.Errorf("--timeout %s: want a positive duration", c.Timeout)
	}
	return nil
}

// Env is the suite binary's environment: the process's, then the suite's variables
// (e2e/suite_test.go loadConfig reads them; they win over any inherited value).
func (c Config) Env(base []string) []string {
	keep := ""
	if c.Keep {
		keep = "1"
	}
	envoyVersion := "n/a"
	if c.Proxy == "envoy" {
		envoyVersion = c.EnvoyVersion
	}
	return append(base,
		"SVCLB_E2E=1",
		"SVCLB_KUBECONFIG="+c.Kubeconfig,
		"SVCLB_CLUSTER="+c.Cluster,
		"SVCLB_ARTIFACTS="+c.Artifacts,
		"SVCLB_PROXY="+c.Proxy,
		"SVCLB_PROXY_CHOICE="+c.ProxyChoice,
		"SVCLB_NODE_ACCESS="+c.NodeAccess,
		contract.RegistryEnv+"="+c.Registry,
		"SVCLB_ENVOY_IMAGE="+c.EnvoyImage,
		"SVCLB_ENVOY_VERSION="+envoyVersion,
		"SVCLB_KIND_VERSION="+c.KindVersion,
		"SVCLB_E2E_START="+strconv.FormatInt(c.Start.Unix(), 10),
		"KEEP_CLUSTER="+keep,
	)
}

// Args are the suite binary's flags: TestE2E alone, verbose, the label filter, and the
// JUnit and JSON reports in the artifacts (the report renderer reads ginkgo.json).
func (c Config) Args() []string {
	return []string{
		"-test.run", "^TestE2E$", "-test.count=1", "-test.timeout", c.Timeout.String(), "-test.v",
		"-ginkgo.v", "-ginkgo.label-filter=" + c.Filter,
		"-ginkgo.junit-report=" + filepath.Join(c.Artifacts, "junit.xml"),
		"-ginkgo.json-report=" + filepath.Join(c.Artifacts, "ginkgo.json"),
	}
}

// suiteOutputs are what a run of the suite writes into the artifacts (make e2e-svc's list
// less what e2e/run.sh writes before the suite: phases.tsv, progress.log, kind-logs).
var (
	suiteOutputDirs  = []string{"legs", "failures"}
	suiteOutputFiles = []string{"report.md", "report.html", "ginkgo.json", "junit.xml", "env.json",
		"programming.json", "cni-latency.json", "failure.txt", "e2e.log"}
)

// CleanArtifacts removes what an earlier run of the suite wrote into dir, and only that:
// dir may be a directory the user owns. phases too: the phases of that run (a run that owns
// its report; e2e/run.sh has written this run's already when it does not).
func CleanArtifacts(dir string, phases bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range suiteOutputDirs {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return err
		}
	}
	files := suiteOutputFiles
	if phases {
		files = append(files[:len(files):len(files)], PhasesFile)
	}
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// PhasesFile is the artifacts' phase timings (name TAB seconds), e2e/run.sh's format, that
// report.md's wall-time table reads.
const PhasesFile = "phases.tsv"
