// Env: the suites' settings, read from the environment their run.sh sets.

package kit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/kindconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Env reads a suite's settings from the environment. A variable that is unset or empty takes
// the default; one that does not parse takes it too, and the first such is Err's.
type Env struct {
	// Lookup reads a variable; nil: os.Getenv.
	Lookup func(string) string
	err    error
}

func (e *Env) get(k string) string {
	if e.Lookup == nil {
		return os.Getenv(k)
	}
	return e.Lookup(k)
}

func (e *Env) fail(k, v, want string) {
	if e.err == nil {
		e.err = fmt.Errorf("%s=%q: want %s", k, v, want)
	}
}

// Err is the first variable that did not parse.
func (e *Env) Err() error { return e.err }

// String is k, or def.
func (e *Env) String(k, def string) string {
	if v := e.get(k); v != "" {
		return v
	}
	return def
}

// On says whether k is "1" (a suite's switch: SVCLB_E2E=1, KEEP_CLUSTER=1).
func (e *Env) On(k string) bool { return e.get(k) == "1" }

// Count is k as a whole number ≥ 0, or def.
func (e *Env) Count(k string, def int) int { return e.integer(k, def, 0, "a count") }

// Positive is k as a whole number > 0, or def.
func (e *Env) Positive(k string, def int) int { return e.integer(k, def, 1, "a positive integer") }

func (e *Env) integer(k string, def, least int, want string) int {
	v := e.get(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		e.fail(k, v, want)
		return def
	}
	return n
}

// Float is k as a number, or def.
func (e *Env) Float(k string, def float64) float64 {
	v := e.get(k)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.fail(k, v, "a number")
		return def
	}
	return f
}

// Duration is k as a Go duration (4m, 1h30m), or def.
func (e *Env) Duration(k string, def time.Duration) time.Duration {
	v := e.get(k)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.fail(k, v, "a duration such as 4m or 1h30m")
		return def
	}
	return d
}

// Start is k as the Unix second a make target started (run.sh passes its T0, so that the
// suite's elapsed times count from there), or now.
func (e *Env) Start(k string) time.Time {
	if s, err := strconv.ParseInt(e.get(k), 10, 64); err == nil && s > 0 {
		return time.Unix(s, 0)
	}
	return time.Now()
}

// Target is what every suite reads to reach the kind cluster, and the node proxy it runs.
type Target struct {
	Kubeconfig string // SVCLB_KUBECONFIG, else KUBECONFIG (one file), else <repo>/_output/kubeconfig
	Cluster    string // SVCLB_CLUSTER: the kind cluster's name; default svclb
	Proxy      string // SVCLB_PROXY: manifests.ProxyBuiltin (the default) or ProxyEnvoy
	// NodeAccess is SVCLB_NODE_ACCESS: how the suite reaches a node's root, docker or
	// daemonset (fixtures/cluster NodeAccess); empty: chosen per cluster (ChooseNodeAccess).
	NodeAccess cluster.NodeAccess
	// Images is contract.RegistryEnv (SVCLB_REGISTRY): where the clusters get the project's
	// images; a suite passes it to images.Use at its start.
	Images images.Source
}

// Target reads the suite's Target; repo is the repository root.
func (e *Env) Target(repo string) Target {
	return Target{
		Kubeconfig: e.kubeconfig(repo),
		Cluster:    e.String("SVCLB_CLUSTER", kindconfig.DefaultName),
		Proxy:      e.String("SVCLB_PROXY", manifests.ProxyBuiltin),
		NodeAccess: e.nodeAccess("SVCLB_NODE_ACCESS"),
		Images:     e.images(contract.RegistryEnv),
	}
}

func (e *Env) images(k string) images.Source {
	v := e.get(k)
	s, err := images.Parse(v)
	if err != nil {
		e.fail(k, v, "a registry, or empty for kind-loaded images: "+err.Error())
	}
	return s
}

func (e *Env) nodeAccess(k string) cluster.NodeAccess {
	v := e.get(k)
	a, err := cluster.ParseNodeAccess(v)
	if err != nil {
		e.fail(k, v, strings.Join(cluster.NodeAccessModes, " or ")+", or empty to choose")
	}
	return a
}

// kubeconfig is the one kubeconfig file a suite reads: SVCLB_KUBECONFIG (what make passes,
// _output/kubeconfig), else KUBECONFIG as kubectl reads it, else the file `make cluster`
// writes. The suites read one file with its current context: a KUBECONFIG that lists several
// is an error (Err), and the first is taken (svclb-e2e run merges them and picks a context).
func (e *Env) kubeconfig(repo string) string {
	if v := e.get("SVCLB_KUBECONFIG"); v != "" {
		return v
	}
	v := e.get("KUBECONFIG")
	if first, _, several := strings.Cut(v, string(filepath.ListSeparator)); several {
		e.fail("KUBECONFIG", v, "one file (or set SVCLB_KUBECONFIG)")
		v = first
	}
	if v != "" {
		return v
	}
	return filepath.Join(repo, "_output", "kubeconfig")
}

// Suite is what every suite reads first: whether it runs, where, and where its artifacts go.
type Suite struct {
	Enabled bool // the suite's switch is "1": run against the cluster
	Target
	Artifacts string    // the artifacts directory
	Start     time.Time // when the make target started (Start), for the progress lines
}

// SuiteVars names a suite's variables: its switch, its artifacts directory (and the default
// below the repository root) and its start.
type SuiteVars struct {
	On, Artifacts, ArtifactsDir, Start string
}

// Suite reads the suite's variables; repo is the repository root.
func (e *Env) Suite(repo string, v SuiteVars) Suite {
	return Suite{
		Enabled:   e.On(v.On),
		Target:    e.Target(repo),
		Artifacts: e.String(v.Artifacts, filepath.Join(repo, v.ArtifactsDir)),
		Start:     e.Start(v.Start),
	}
}
