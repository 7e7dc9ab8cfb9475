package kubeproxyguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

func svc(s string) types.NamespacedName {
	ns, name, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

// chosen134 are the Services of kube-proxy-v1.34.nft the tests guard; the
// others (default/kubernetes, other/demo, default/demo-canary) must stay.
var chosen134 = []types.NamespacedName{svc("default/demo"), svc("default/empty"), svc("default/sticky"), svc("default/local"), svc("default/remote-only")}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func nft(t testing.TB, ns *netnstest.NS, args ...string) string {
	t.Helper()
	out, err := ns.Command("nft", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func load(t testing.TB, ns *netnstest.NS, file string) {
	t.Helper()
	nft(t, ns, "-f", filepath.Join("testdata", file))
}

// listTable is `nft list table ip kube-proxy` with the elements of each set
// sorted one per line: element order is the kernel's hash order, which is
// not part of the ruleset's meaning and may change when elements come back.
func listTable(t testing.TB, ns *netnstest.NS) string {
	return canonical(nft(t, ns, "list", "table", "ip", TableName))
}

func canonical(s string) string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		if !strings.HasPrefix(trim, "elements = {") {
			out = append(out, l)
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, "\t "))]
		body := strings.TrimPrefix(trim, "elements = {")
		for !strings.HasSuffix(strings.TrimSpace(body), "}") && i+1 < len(lines) {
			i++
			body += " " + strings.TrimSpace(lines[i])
		}
		body = strings.TrimSuffix(strings.TrimSpace(body), "}")
		var elems []string
		for _, e := range strings.Split(body, ",") {
			if e = strings.TrimSpace(e); e != "" {
				elems = append(elems, e)
			}
		}
		sort.Strings(elems)
		out = append(out, indent+"elements = {")
		for _, e := range elems {
			out = append(out, indent+"\t"+e+",")
		}
		out = append(out, indent+"}")
	}
	return strings.Join(out, "\n")
}

// lineDiff is a small line diff (LCS) for failure messages and for the
// "only removals" check.
func lineDiff(a, b string) string {
	removed, added := diffLines(a, b)
	var s strings.Builder
	for _, l := range removed {
		s.WriteString("-" + l + "\n")
	}
	for _, l := range added {
		s.WriteString("+" + l + "\n")
	}
	return s.String()
}

func diffLines(a, b string) (removed, added []string) {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			removed = append(removed, x[i])
			i++
		default:
			added = append(added, y[j])
			j++
		}
	}
	removed = append(removed, x[i:]...)
	added = append(added, y[j:]...)
	return removed, added
}

// startGuard runs a Guard in ns until the test ends.
func startGuard(t testing.TB, ns *netnstest.NS, resync time.Duration, svcs ...types.NamespacedName) *Guard {
	t.Helper()
	g, err := New(Options{NodeName: "test", NetNS: ns.Fd(), Resync: resync, Logger: testLogger(t), RestoreUnchosen: true})
	if err != nil {
		t.Fatal(err)
	}
	g.SetServices(svcs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = g.Close()
	})
	return g
}

// settle returns once no pass that began before it is still running: a
// pass in flight may still hold the chosen set SetServices just replaced
// (Reconcile waits for it, then runs a pass of its own).
func settle(t testing.TB, g *Guard) {
	t.Helper()
	if err := g.Reconcile(); err != nil {
		t.Fatalf("pass: %v", err)
	}
}

// guardedV134 loads kube-proxy-v1.34.nft into a fresh namespace, runs a
// Guard of chosen134 there and waits until they are deleted.
func guardedV134(t testing.TB, resync time.Duration) (*netnstest.NS, *nftables.Conn, *Guard) {
	t.Helper()
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	c := conn(t, ns)
	g := startGuard(t, ns, resync, chosen134...)
	waitClean(t, c, chosen134)
	return ns, c, g
}

// onPath reads the kernel's table (not the guard's status) and returns the
// Services of svcs that still have a ClusterIP entry point.
func onPath(t testing.TB, c *nftables.Conn, svcs []types.NamespacedName) []types.NamespacedName {
	t.Helper()
	want := map[types.NamespacedName]bool{}
	for _, s := range svcs {
		want[s] = true
	}
	tb, err := readTable(c, want)
	if errors.Is(err, errNoTable) {
		return nil // kube-proxy has not written it yet
	}
	if err != nil {
		t.Fatalf("read table: %v", err)
	}
	return tb.onPathServices()
}

// waitFor polls cond every 2ms until it holds or d passes, and returns how
// long that took.
func waitFor(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Millisecond, d, true,
		func(context.Context) (bool, error) { return cond(), nil })
	return time.Since(start), err == nil
}

func conn(t testing.TB, ns *netnstest.NS) *nftables.Conn {
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// expectCut fails the test unless every Service of svcs is off kube-proxy's
// ClusterIP path within 1 s, and returns how long it took.
func expectCut(t testing.TB, c *nftables.Conn, svcs []types.NamespacedName, what string) time.Duration {
	t.Helper()
	took, ok := waitFor(time.Second, func() bool { return len(onPath(t, c, svcs)) == 0 })
	if !ok {
		t.Fatalf("%s: still on kube-proxy's path after %v: %v", what, took, onPath(t, c, svcs))
	}
	return took
}

// waitClean waits until no ClusterIP entry of svcs is left in the kernel's
// table.
func waitClean(t testing.TB, c *nftables.Conn, svcs []types.NamespacedName) {
	t.Helper()
	if _, ok := waitFor(5*time.Second, func() bool { return len(onPath(t, c, svcs)) == 0 }); !ok {
		t.Fatalf("ClusterIP entries still in the table after 5s: %v", onPath(t, c, svcs))
	}
}

// waitStatusClean waits until the guard reports every Service clean; the
// assertions that follow say what is wrong when it does not.
func waitStatusClean(t testing.TB, g *Guard) {
	t.Helper()
	waitFor(2*time.Second, func() bool {
		for _, s := range g.Status().Services {
			if s.State != StateClean {
				return false
			}
		}
		return true
	})
}

func TestGuardV134(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	before := listTable(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.34-before.golden"), []byte(before))
	c := conn(t, ns)

	// Resync far away: only the monitor can meet the 1 s deadline below.
	g := startGuard(t, ns, time.Hour, chosen134...)
	waitClean(t, c, chosen134)
	after := listTable(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.34-guarded.golden"), []byte(after))
	// The ClusterIP entry points of the chosen Services are cut, nothing
	// else: their chains, affinity sets, NodePort element (default/demo's
	// tcp . 30080) and cluster-ips elements stay byte for byte.
	expectOnlyCut(t, before, after,
		"10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http,",
		"10.96.135.185 . tcp . 5353 comment \"default/empty:5353-53\" : goto reject-chain,",
		"10.96.20.20 . tcp . 8080 : goto service-4BJXAE53-default/sticky/tcp/web,",
		"10.96.30.30 . tcp . 5353 : goto local-2Q7NANCK-default/local/tcp/dns,",
		"10.96.50.50 . tcp . 9000 comment \"default/remote-only:p\" : drop,",
	)

	const restores = 5
	for i := range restores {
		// The guard is often done before nft exits: the re-deletion
		// counts below prove each restore happened.
		load(t, ns, "kube-proxy-v1.34-restore.nft")
		t.Logf("restore %d: cut again within %v", i, expectCut(t, c, chosen134, fmt.Sprint("restore ", i)))
		waitClean(t, c, chosen134)
		if got := listTable(t, ns); got != after {
			t.Fatalf("restore %d: ruleset after re-deletion differs from the first:\n%s", i, lineDiff(after, got))
		}
	}
	// The kernel is clean when the cut commits; the status follows when
	// the same pass records it.
	waitStatusClean(t, g)
	st := g.Status()
	if len(st.Services) != len(chosen134) {
		t.Fatalf("status has %d Services", len(st.Services))
	}
	for _, s := range st.Services {
		if s.State != StateClean || s.Redeletions != restores || s.LastRedeletion == nil || len(s.Remaining) != 0 {
			t.Errorf("%s/%s: state %s, %d re-deletions (want %d), remaining %v", s.Namespace, s.Name, s.State, s.Redeletions, restores, s.Remaining)
		}
		if s.LastRedeletionLatencySeconds <= 0 || s.LastRedeletionLatencySeconds > 1 {
			t.Errorf("%s/%s: last re-deletion latency %vs", s.Namespace, s.Name, s.LastRedeletionLatencySeconds)
		}
	}
	checkHandler(t, g)
	sticky := st.Services[slices.IndexFunc(st.Services, func(s ServiceStatus) bool { return s.Name == "sticky" })]
	if want := []ObjectRef{{Kind: KindElement, Name: "service-ips: 10.96.20.20 . tcp . 8080 : goto service-4BJXAE53-default/sticky/tcp/web"}}; !slices.Equal(sticky.Deleted, want) {
		t.Errorf("sticky: deleted %v, want %v", sticky.Deleted, want)
	}
}

// expectOnlyCut fails unless after is before with exactly the element lines
// replaced (canonical listings: one element a line) by their cut: same key,
// verdict continue, and the comment "svclb-guard-cut|<verdict>|<comment>"
// keeping kube-proxy's verdict and comment.
func expectOnlyCut(t *testing.T, before, after string, replaced ...string) {
	t.Helper()
	removed, added := diffLines(before, after)
	removed, added = withoutCommon(removed, added)
	var cut []string
	for _, l := range replaced {
		cut = append(cut, cutLine(l))
	}
	slices.Sort(removed)
	slices.Sort(added)
	replaced = slices.Sorted(slices.Values(replaced))
	slices.Sort(cut)
	if !slices.Equal(removed, replaced) || !slices.Equal(added, cut) {
		t.Fatalf("guarding changed the ruleset by\n%s\nwant only these lines replaced:\n%s\nby:\n%s",
			lineDiff(before, after), strings.Join(replaced, "\n"), strings.Join(cut, "\n"))
	}
}

// cutLine is the cut of an element line "KEY [comment "C"] : VERDICT," as
// nft prints it, spelled out here rather than by the code under test.
func cutLine(l string) string {
	indent := l[:len(l)-len(strings.TrimLeft(l, "\t "))]
	head, v, _ := strings.Cut(strings.TrimSuffix(strings.TrimSpace(l), ","), " : ")
	key, c, _ := strings.Cut(head, ` comment "`)
	return indent + key + ` comment "svclb-guard-cut|` + v + "|" + strings.TrimSuffix(c, `"`) + `" : continue,`
}

// withoutCommon drops the lines both in removed and added (a line the
// canonical sort moved), trimmed.
func withoutCommon(removed, added []string) ([]string, []string) {
	count := map[string]int{}
	for _, l := range added {
		count[strings.TrimSpace(l)]++
	}
	var r, a []string
	for _, l := range removed {
		l = strings.TrimSpace(l)
		if count[l] > 0 {
			count[l]--
			continue
		}
		r = append(r, l)
	}
	for l, n := range count {
		for range n {
			a = append(a, l)
		}
	}
	return r, a
}

func TestGuardV137(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.37.nft")
	before := listTable(t, ns)
	c := conn(t, ns)
	demo := []types.NamespacedName{svc("default/demo")}
	startGuard(t, ns, time.Hour, demo...)
	waitClean(t, c, demo)
	after := listTable(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.37-guarded.golden"), []byte(after))
	expectOnlyCut(t, before, after, "10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http,")
	for i := range 3 {
		load(t, ns, "kube-proxy-v1.37-restore.nft")
		expectCut(t, c, demo, fmt.Sprint("restore ", i))
		waitClean(t, c, demo)
		if got := listTable(t, ns); got != after {
			t.Fatalf("restore %d: differs:\n%s", i, lineDiff(after, got))
		}
	}
}

// kube-proxy writing while the guard deletes: transactions race, some of
// the guard's fail (an element kube-proxy just re-added is fine, a chain it
// re-referenced is EBUSY); when the writer stops, the guard must converge
// to the same ruleset as without the race.
func TestGuardConcurrentWriter(t *testing.T) {
	ns, c, g := guardedV134(t, time.Hour)
	want := listTable(t, ns)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Errors are expected when the guard deleted a chain in
				// between add and flush; kube-proxy would resync too.
				_ = ns.Command("nft", "-f", filepath.Join("testdata", "kube-proxy-v1.34-restore.nft")).Run()
				time.Sleep(time.Duration(w*7) * time.Millisecond)
			}
		}()
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	expectCut(t, c, chosen134, "after the writers stopped")
	waitClean(t, c, chosen134)
	if got := listTable(t, ns); got != want {
		t.Fatalf("ruleset after the race differs:\n%s", lineDiff(want, got))
	}
	var redel int
	for _, s := range g.Status().Services {
		redel += s.Redeletions
	}
	t.Logf("re-deletions during the race: %d", redel)
	if redel < len(chosen134) {
		t.Errorf("only %d re-deletions while kube-proxy kept restoring", redel)
	}
}

// The monitor's channel closes (as on ENOBUFS): the guard subscribes again
// and still re-deletes within 1 s without waiting for the periodic pass.
func TestGuardMonitorClosed(t *testing.T) {
	ns, c, g := guardedV134(t, time.Hour)
	for i := 1; i <= 3; i++ {
		// Closing before the first subscription would close nothing.
		if _, ok := waitFor(2*time.Second, func() bool { return g.Status().Monitor.Subscribed }); !ok {
			t.Fatalf("monitor not subscribed: %+v", g.Status().Monitor)
		}
		g.closeMonitor()
		if _, ok := waitFor(2*time.Second, func() bool {
			m := g.Status().Monitor
			return m.Resubscriptions >= i && m.Subscribed
		}); !ok {
			t.Fatalf("monitor not renewed: %+v", g.Status().Monitor)
		}
		load(t, ns, "kube-proxy-v1.34-restore.nft")
		expectCut(t, c, chosen134, fmt.Sprint("round ", i))
		waitClean(t, c, chosen134)
	}
}

// cutByGoneGuard cuts chosen134 with a guard that then exits, and returns
// the table it left.
func cutByGoneGuard(t *testing.T, ns *netnstest.NS) string {
	t.Helper()
	g, err := New(Options{NetNS: ns.Fd(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.SetServices(chosen134)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.DeleteNow(ctx); err != nil {
		t.Fatal(err)
	}
	return listTable(t, ns)
}

// A guard that starts when the objects are already gone (a restarted pod)
// changes nothing, reports the Services clean, and counts kube-proxy's next
// restore as a re-deletion.
func TestGuardRestartObjectsGone(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	c := conn(t, ns)

	want := cutByGoneGuard(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.34-guarded.golden"), []byte(want))

	g2 := startGuard(t, ns, time.Hour, chosen134...)
	if _, ok := waitFor(2*time.Second, func() bool { return g2.Status().Passes > 0 }); !ok {
		t.Fatal("no pass")
	}
	for _, s := range g2.Status().Services {
		if s.State != StateClean || s.Deletions != 0 || s.Errors != 0 {
			t.Errorf("%s/%s after restart: %+v", s.Namespace, s.Name, s)
		}
	}
	if got := listTable(t, ns); got != want {
		t.Fatalf("restart changed the ruleset:\n%s", lineDiff(want, got))
	}
	load(t, ns, "kube-proxy-v1.34-restore.nft")
	expectCut(t, c, chosen134, "restore after restart")
	if _, ok := waitFor(time.Second, func() bool {
		for _, s := range g2.Status().Services {
			if s.Redeletions != 1 {
				return false
			}
		}
		return true
	}); !ok {
		t.Errorf("re-deletions not counted: %+v", g2.Status().Services)
	}
}

// A Service whose label is removed mid-run is no longer guarded: the guard
// puts it back, kube-proxy's restore of it stays; the other Services are
// still cut again.
func TestGuardLabelRemoved(t *testing.T) {
	ns, c, g := guardedV134(t, 200*time.Millisecond)

	demo := svc("default/demo")
	rest := slices.DeleteFunc(slices.Clone(chosen134), func(s types.NamespacedName) bool { return s == demo })
	g.SetServices(rest)
	settle(t, g)
	load(t, ns, "kube-proxy-v1.34-restore.nft")
	expectCut(t, c, rest, "restore after the label went")
	// Through several periodic passes.
	passes := g.Status().Passes
	NewWithT(t).Consistently(func() []types.NamespacedName {
		return onPath(t, c, []types.NamespacedName{demo})
	}).WithTimeout(time.Second).WithPolling(10*time.Millisecond).
		Should(HaveLen(1), "unguarded default/demo was deleted again")
	if _, ok := waitFor(5*time.Second, func() bool { return g.Status().Passes >= passes+2 }); !ok {
		t.Fatalf("no periodic pass ran: %d passes", g.Status().Passes)
	}
	out := listTable(t, ns)
	for _, l := range []string{
		"10.96.100.100 . tcp . 80 : goto service-C642UMGT-default/demo/tcp/http",
		"tcp . 30080 : goto external-C642UMGT-default/demo/tcp/http",
		"meta l4proto tcp dnat to 10.244.1.10:8080",
	} {
		if !strings.Contains(out, l) {
			t.Errorf("restored default/demo lacks %q", l)
		}
	}
	for _, s := range g.Status().Services {
		if s.Name == "demo" && s.Namespace == "default" {
			t.Errorf("status still lists default/demo")
		}
	}
}

// checkHandler reads /status and /metrics as the e2e does.
func checkHandler(t *testing.T, g *Guard) {
	t.Helper()
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/status: %v", err)
	}
	if st.Node != "test" || !st.TablePresent || !st.Monitor.Subscribed || len(st.Services) != len(chosen134) {
		t.Errorf("/status: %+v", st)
	}
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	demo := map[string]string{"namespace": "default", "service": "demo"}
	sticky := map[string]string{"namespace": "default", "service": "sticky"}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"svclb_guard_redeletions_total", demo, 5},
		{"svclb_guard_service_on_path", sticky, 0},
		{"svclb_guard_redeletion_latency_seconds", nil, 25}, // sample count
		{"svclb_guard_guarded_services", nil, 5},
	} {
		if got, ok := sample(mfs, m.name, m.labels); !ok || got != m.want {
			t.Errorf("/metrics: %s%v = %v (present: %v), want %v", m.name, m.labels, got, ok, m.want)
		}
	}
}

// sample is the value of the series of name with exactly labels: a counter's
// or gauge's value, a histogram's sample count.
func sample(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if !maps.Equal(got, labels) {
			continue
		}
		switch {
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// A kube-proxy table without the cluster-ips set: the guard cannot tell a
// ClusterIP key from an external IP one, so it cuts nothing and says why.
func TestGuardWithoutClusterIPsSet(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	nft(t, ns, "flush", "chain", "ip", TableName, "cluster-ips-check")
	nft(t, ns, "delete", "set", "ip", TableName, clusterIPsSet)
	before := listTable(t, ns)
	g, err := New(Options{NetNS: ns.Fd(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.SetServices(chosen134)
	if err := g.Reconcile(); !errors.Is(err, errNoClusterIPs) {
		t.Errorf("pass: %v, want %v", err, errNoClusterIPs)
	}
	if got := listTable(t, ns); got != before {
		t.Errorf("the pass changed the ruleset:\n%s", lineDiff(before, got))
	}
	if st := g.Status(); st.LastPassError == "" {
		t.Errorf("status does not say why: %+v", st)
	}
}
