package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
}

// ServiceClusterIPRange is the apiserver's --service-cluster-ip-range; the
// apiserver turns it into the default ServiceCIDR "kubernetes".
const ServiceClusterIPRange = "10.96.0.0/16"

// Start runs an apiserver + etcd for the test (stopped in t.Cleanup) and
// returns an admin rest.Config for it. Without the binaries it skips the test.
func Start(t testing.TB, o Options) *rest.Config {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Skipf("testenv: %s not found in %s (%s): run `make k8s-test-bins` to build the Kubernetes test binaries", b, dir, BinDirEnv)
		}
	}
	noExisting := false
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		UseExistingCluster:       &noExisting,
		CRDs:                     o.CRDs,
		ControlPlaneStartTimeout: 90 * time.Second, // a loaded 2-core machine starts slowly
		ControlPlaneStopTimeout:  30 * time.Second,
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
		if err := env.Stop(); err != nil {
			t.Errorf("testenv: stopping the control plane: %v", err)
		}
	})
	return cfg
}

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
