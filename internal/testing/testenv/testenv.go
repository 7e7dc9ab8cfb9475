package testenv

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

// BinDirEnv names the directory holding kube-apiserver, etcd and kubectl.
// Unset, it is <repo root>/_output/bin.
const BinDirEnv = "SVCLB_K8S_BIN_DIR"

// Options tune Start.
type Options struct {
	// CRDs are installed (and waited for) before Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// APIServerArgs are extra kube-apiserver flags, "name" → values.
	APIServerArgs map[string][]string
	// Restartable keeps the apiserver's certificates in a directory the test owns, so
	// ControlPlane.APIServer.Stop() then Start() brings it back on the same address with the
	// same credentials (an apiserver outage, not a new cluster).
	Restartable bool
	// StopTimeout bounds each process's graceful stop (default 30 s); past it envtest kills the
	// process, which the cleanup then accepts as a stop.
	StopTimeout time.Duration
}

// ServiceClusterIPRange is the apiserver's --service-cluster-ip-range; the
// apiserver turns it into the default ServiceCIDR "kubernetes".
const ServiceClusterIPRange = "10.96.0.0/16"

// Start runs an apiserver + etcd for the test (stopped in t.Cleanup) and
// returns an admin rest.Config for it. Without the binaries it ends the test
// as Binary does.
func Start(t testing.TB, o Options) *rest.Config {
	t.Helper()
	_, cfg := StartEnv(t, o)
	return cfg
}

// StartEnv is Start that also returns the environment, for a test that stops and restarts the
// control plane's processes itself (see Options.Restartable).
func StartEnv(t testing.TB, o Options) (*envtest.Environment, *rest.Config) {
	t.Helper()
	// envtest logs through controller-runtime's logger; unset, it prints a stack trace saying so.
	ctrllog.SetLogger(logr.Discard())
	dir := binDir(t)
	for _, b := range []string{"kube-apiserver", "etcd"} {
		Binary(t, b)
	}
	noExisting := false
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		UseExistingCluster:       &noExisting,
		CRDs:                     o.CRDs,
		ControlPlaneStartTimeout: 90 * time.Second, // a loaded 2-core machine starts slowly
		ControlPlaneStopTimeout:  cmp.Or(o.StopTimeout, 30*time.Second),
	}
	if o.Restartable {
		env.ControlPlane.APIServer = &envtest.APIServer{CertDir: t.TempDir()}
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("service-cluster-ip-range", ServiceClusterIPRange)
	for k, v := range o.APIServerArgs {
		args.Set(k, v...)
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("testenv: starting kube-apiserver and etcd from %s: %v", dir, err)
	}
	t.Logf("testenv: kube-apiserver at %s up in %s", cfg.Host, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := env.Stop(); err != nil && !Killed(err) {
			t.Errorf("testenv: stopping the control plane: %v", err)
		}
	})
	return env, cfg
}

// Binary returns the path of a Kubernetes test binary (kube-apiserver, etcd,
// kubectl, kube-proxy) in BinDir. Absent, it ends the test the prereq way: a
// skip under `make unit`, a failure under `make test` (which builds them).
func Binary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(binDir(t), name)
	if _, err := os.Stat(p); err != nil {
		prereq.Missing(t, "testenv: %s not found in %s (%s): run `make k8s-test-bins` to build the Kubernetes test binaries", name, filepath.Dir(p), BinDirEnv)
	}
	return p
}

func binDir(t testing.TB) string {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dir
}

// Killed reports envtest's error for a process it had to kill after the stop timeout.
func Killed(err error) bool { return strings.Contains(err.Error(), "timeout waiting for process") }

// BinDir returns $SVCLB_K8S_BIN_DIR, or <repo root>/_output/bin.
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "bin"), nil
}

// RepoRoot walks up from the working directory (a test's package directory)
// to the directory holding go.mod.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("finding the repository root: no go.mod above the working directory")
		}
		d = parent
	}
}
