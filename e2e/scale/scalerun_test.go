package scale

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
)

// startRun is where TestGrowth, TestHeld and TestOnDemand start once they have read their own
// settings from env: it reads the perf results directory (SVCLB_PERF_ARTIFACTS, default
// _artifacts/perf), fails on any bad setting, and starts the harness, with a context bounded
// at bound.
func startRun(t *testing.T, bound time.Duration) (h *harness, ctx context.Context, out string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out = env.String("SVCLB_PERF_ARTIFACTS", filepath.Join(root, "_artifacts", "perf"))
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
	h = newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return h, ctx, out
}

// runInfo begins a result's RunInfo: started now, the load before, the CPUs.
func runInfo(t *testing.T) scaleresult.RunInfo {
	return scaleresult.RunInfo{Started: time.Now(), LoadBefore: loadavg(t), CPUs: runtime.NumCPU()}
}

// saver returns save, which writes the result into out as it stands (after each step, and
// where a run breaks); a failed write fails the test without stopping it.
func saver(t *testing.T, result interface{ Write(dir string) error }, out string) (save func()) {
	return func() {
		if err := result.Write(out); err != nil {
			t.Error(err)
		}
	}
}

// startPod is TestHeld's and TestOnDemand's client: a captured pod (podNet) with endpoints
// echo servers on the host's end of its veth, registered on the harness's Node in namespace
// ns, which it creates.
func startPod(t *testing.T, ctx context.Context, h *harness, ns string, endpoints int) *podNet {
	pod := newPodNet(t, h.netnsDir(t), endpoints)
	serveEcho(t, pod.backends)
	if err := createNamespace(ctx, h.kube, ns); err != nil {
		t.Fatal(err)
	}
	if err := pod.createPod(ctx, h.kube, ns, "client"); err != nil {
		t.Fatal(err)
	}
	return pod
}
