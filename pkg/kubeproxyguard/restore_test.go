package kubeproxyguard

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// A Service that stops being chosen gets kube-proxy's elements back from
// the guard, exactly (verdict and comment): with all unchosen, the table is
// kube-proxy's original byte for byte; with one, only its lines come back.
// kube-proxy itself would not restore them before its next full sync.
func TestGuardRestoreOnUnchoose(t *testing.T) {
	ns, c, g := guardedV134(t, time.Hour)
	guarded := listTable(t, ns)

	demo, empty := svc("default/demo"), svc("default/empty")
	rest := slices.DeleteFunc(slices.Clone(chosen134), func(s types.NamespacedName) bool { return s == demo || s == empty })
	g.SetServices(rest)
	settle(t, g)
	if got := onPath(t, c, []types.NamespacedName{demo, empty}); len(got) != 2 {
		t.Fatalf("unchosen Services on kube-proxy's path: %v, want default/demo and default/empty", got)
	}
	expectOnlyCut(t, listTable(t, ns), guarded,
		"10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http,",
		"10.96.135.185 . tcp . 5353 comment \"default/empty:5353-53\" : goto reject-chain,",
	)
	waitClean(t, c, rest)

	g.SetServices(nil)
	settle(t, g)
	golden.Check(t, filepath.Join("testdata", "v1.34-before.golden"), []byte(listTable(t, ns)))
}

// A guard that must restore unchosen Services (the DaemonSet's) restores
// nothing before it knows the chosen set: a restarted guard's first passes
// would otherwise put every cut Service back on kube-proxy's path until the
// watch syncs.
func TestGuardNoRestoreBeforeChosenKnown(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	// Cut by a guard that is gone: no one would cut again what the pass
	// below put back.
	guarded := cutByGoneGuard(t, ns)

	g, err := New(Options{NetNS: ns.Fd(), Logger: testLogger(t), RestoreUnchosen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Reconcile(); err != nil {
		t.Fatal(err)
	}
	if got := listTable(t, ns); got != guarded {
		t.Fatalf("a pass before SetServices changed the ruleset:\n%s", lineDiff(guarded, got))
	}
	// Once told, it puts back what is not chosen.
	g.SetServices(nil)
	if err := g.Reconcile(); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "v1.34-before.golden"), []byte(listTable(t, ns)))
}

// The guard's own writes (the overwrite adds an element, which the nft
// monitor reports) trigger at most one more pass, which finds nothing to
// do: no loop. A loop would show as passes that never stop with no writer.
func TestGuardOwnWritesDoNotLoop(t *testing.T) {
	ns, c, g := guardedV134(t, time.Hour)
	idle := quietPasses(t, g)
	for i := range 3 {
		load(t, ns, "kube-proxy-v1.34-restore.nft")
		expectCut(t, c, chosen134, "restore")
		after := quietPasses(t, g)
		// The restore's pass (its burst of events may be split over two),
		// the one the cut's own events trigger, and none after.
		if n := after - idle; n < 2 || n > 3 {
			t.Errorf("round %d: %d passes for one restore, want 2 or 3", i, n)
		}
		idle = after
	}
}

// quietPasses waits until no pass has run for 300 ms (the Resync is an
// hour: only nft events trigger passes) and returns the count of passes.
func quietPasses(t *testing.T, g *Guard) uint64 {
	t.Helper()
	const quiet = 300 * time.Millisecond
	last, since := g.Status().Passes, time.Now()
	if _, ok := waitFor(3*time.Second, func() bool {
		if n := g.Status().Passes; n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	}); !ok {
		t.Fatalf("passes never stop (%d so far): the guard's own writes trigger passes that write again", last)
	}
	return last
}
