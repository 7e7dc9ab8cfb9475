package kubeproxyguard

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// kpName is kube-proxy's hashAndTruncate: the bench ruleset uses the names
// kube-proxy would write (the guard itself never computes them).
func kpName(prefix, base string) string {
	h := sha256.Sum256([]byte(base))
	return prefix + base32.StdEncoding.EncodeToString(h[:])[:8] + "-" + base
}

// benchServices writes an nft script that adds n Services in namespace
// "bench" to kube-proxy-v1.34.nft the way kube-proxy v1.34 would: two
// endpoints each, a NodePort (external- chain) on even ones, ClientIP
// affinity on every tenth.
func benchServices(n int) (string, []types.NamespacedName) {
	var b strings.Builder
	var svcs []types.NamespacedName
	p := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	for i := range n {
		name := fmt.Sprintf("svc-%03d", i)
		svcs = append(svcs, types.NamespacedName{Namespace: "bench", Name: name})
		base := "bench/" + name + "/tcp/http"
		vip := fmt.Sprintf("10.96.%d.%d", 200+i/250, i%250+1)
		svcChain := kpName("service-", base)
		var eps []string
		for e := range 2 {
			ip := fmt.Sprintf("10.245.%d.%d", i/250, i%250+e*0)
			ep := fmt.Sprintf("%s__%s/%d", base, ip, 8080+e)
			eps = append(eps, ep)
			c := kpName("endpoint-", ep)
			p("add chain ip kube-proxy %s", c)
			p("add rule ip kube-proxy %s ip saddr %s jump mark-for-masquerade", c, ip)
			if i%10 == 0 {
				set := kpName("affinity-", ep)
				p("add set ip kube-proxy %s { type ipv4_addr; flags dynamic,timeout; timeout 3h; }", set)
				p("add rule ip kube-proxy %s update @%s { ip saddr }", c, set)
			}
			p("add rule ip kube-proxy %s meta l4proto tcp dnat to %s:%d", c, ip, 8080+e)
		}
		p("add chain ip kube-proxy %s", svcChain)
		p("add rule ip kube-proxy %s ip daddr %s ip saddr != 10.244.0.0/16 jump mark-for-masquerade", svcChain, vip)
		if i%10 == 0 {
			for _, ep := range eps {
				p("add rule ip kube-proxy %s ip saddr @%s goto %s", svcChain, kpName("affinity-", ep), kpName("endpoint-", ep))
			}
		}
		p("add rule ip kube-proxy %s numgen random mod 2 vmap { 0 : goto %s, 1 : goto %s }", svcChain, kpName("endpoint-", eps[0]), kpName("endpoint-", eps[1]))
		p("add element ip kube-proxy cluster-ips { %s }", vip)
		p("add element ip kube-proxy service-ips { %s . tcp . 80 : goto %s }", vip, svcChain)
		if i%2 == 0 {
			ext := kpName("external-", base)
			p("add chain ip kube-proxy %s", ext)
			p("add rule ip kube-proxy %s jump mark-for-masquerade", ext)
			p("add rule ip kube-proxy %s goto %s", ext, svcChain)
			p("add element ip kube-proxy service-nodeports { tcp . %d : goto %s }", 31000+i, ext)
		}
	}
	return b.String(), svcs
}

func loadScript(t testing.TB, ns *netnstest.NS, script string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "script.nft")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	nft(t, ns, "-f", f)
}

// guard100 loads 200 Services (the fixture's 8 + 192 generated), guards
// 100 of them and returns how long the cut (first pass) took.
func guard100(t testing.TB) (cut time.Duration, c *nftables.Conn, ns *netnstest.NS, chosen, others []types.NamespacedName) {
	ns = netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	script, svcs := benchServices(192)
	loadScript(t, ns, script)
	chosen, others = svcs[:100], svcs[100:]
	c = conn(t, ns)

	g, err := New(Options{NetNS: ns.Fd(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.SetServices(chosen)
	start := time.Now()
	if err := g.Reconcile(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start), c, ns, chosen, others
}

func TestGuard100Services(t *testing.T) {
	cut, c, ns, chosen, others := guard100(t)
	if got := onPath(t, c, chosen); len(got) != 0 {
		t.Fatalf("left over: %v", got)
	}
	if got := onPath(t, c, others); len(got) != len(others) {
		t.Fatalf("only %d of %d unchosen Services intact", len(got), len(others))
	}
	// A chosen Service keeps its chains (and NodePort element): only its
	// ClusterIP element is gone.
	out := listTable(t, ns)
	for i, s := range chosen {
		if !strings.Contains(out, "chain "+kpName("service-", s.Namespace+"/"+s.Name+"/tcp/http")+" {") {
			t.Fatalf("%s: service chain gone", s)
		}
		if np := fmt.Sprintf("tcp . %d : goto external-", 31000+i); i%2 == 0 && !strings.Contains(out, np) {
			t.Fatalf("%s: NodePort element %q gone", s, np)
		}
	}
	t.Logf("guarding 100 of 200 Services: cut in %v", cut)
}

func BenchmarkGuard100Services(b *testing.B) {
	var cuts []time.Duration
	for range b.N {
		cut, _, _, _, _ := guard100(b)
		cuts = append(cuts, cut)
	}
	b.ReportMetric(float64(slices.Max(cuts).Microseconds())/1000, "ms-cut-max")
}

// BenchmarkRedeletionLatency restores the fixture's 5 chosen Services 100
// times (as a kube-proxy full sync would) and measures, with an nft monitor
// of its own, from the restoring transaction's notification to the guard's
// deleting one.
func BenchmarkRedeletionLatency(b *testing.B) {
	ns, _, _ := guardedV134(b, time.Hour)

	type ev struct {
		at       time.Time
		add, del bool
	}
	var mu sync.Mutex
	var evs []ev
	mc, err := nftables.New(nftables.WithNetNSFd(ns.Fd()))
	if err != nil {
		b.Fatal(err)
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(1024))
	ch, err := mc.AddGenerationalMonitor(mon)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for batch := range ch {
			now := time.Now()
			e := ev{at: now}
			for _, x := range batch.Changes {
				switch x.Type {
				case nftables.MonitorEventTypeNewSetElem:
					e.add = true
				case nftables.MonitorEventTypeDelSetElem:
					e.del = true
				}
			}
			mu.Lock()
			evs = append(evs, e)
			mu.Unlock()
		}
	}()
	defer func() { _ = mon.Close(); <-done }()

	const restores = 100
	for range b.N {
		var lat []time.Duration
		for i := range restores {
			mu.Lock()
			from := len(evs)
			mu.Unlock()
			load(b, ns, "kube-proxy-v1.34-restore.nft")
			var d time.Duration
			_, ok := waitFor(time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				var added time.Time
				for _, e := range evs[from:] {
					if e.add && added.IsZero() {
						added = e.at
					}
					if e.del && !added.IsZero() {
						d = e.at.Sub(added)
						return true
					}
				}
				return false
			})
			if !ok {
				b.Fatalf("restore %d: no re-deletion within 1s", i)
			}
			lat = append(lat, d)
		}
		slices.Sort(lat)
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		b.ReportMetric(float64(p50.Microseconds())/1000, "ms-p50")
		b.ReportMetric(float64(p99.Microseconds())/1000, "ms-p99")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
		b.Logf("re-deletion latency over %d restores: p50 %v, p99 %v, max %v", restores, p50, p99, lat[len(lat)-1])
	}
}
