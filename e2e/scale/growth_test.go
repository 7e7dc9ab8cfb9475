package scale

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
)

const (
	// growthPoll is how often TestGrowth reads the node proxy's /stats while it waits: the
	// push time's resolution and its floor (/stats is a few hundred bytes of gauges; the
	// config dump, tens of MB at 10k Services, would cost the proxy more than programming).
	growthPoll = 250 * time.Millisecond
	// growthKubeProxyPoll is the same for kube-proxy: each look is two `nft list` runs over
	// the whole table, which cost more than a /stats read.
	growthKubeProxyPoll = 2 * time.Second
	// growthStepBound is how long a step may take to be programmed after its last Create.
	growthStepBound = 15 * time.Minute
	// growthSettle lets each process settle (GC, the proxy's ACKs) before memory is read, as
	// TestRSS does.
	growthSettle = 10 * time.Second
)

// TestGrowth is "how cost grows" (docs/perf.md): kube-proxy, the agent and the node proxy it
// feeds run from an empty cluster while Services are created in steps (SVCLB_SCALE_STEPS,
// default 1000,2000,5000,10000 Services in all; SVCLB_SCALE_ENDPOINTS endpoints each, default
// 10), 8 at a time, as fast as the apiserver takes them. After each step it measures the push
// time (the step's last Create to the node proxy holding every cluster), the agent's pushes for
// the step and their total duration (its own histogram), and VmRSS of all three; it logs a
// table and rewrites GrowthFile in the perf results directory (SVCLB_PERF_ARTIFACTS, default
// _artifacts/perf). SVCLB_SCALE_PROFILE=1 also saves the node proxy's heap profile at each
// step (the agent serves no pprof).
func TestGrowth(t *testing.T) {
	if !env.On("SVCLB_SCALE") {
		t.Skip("set SVCLB_SCALE=1 (make scale-growth) to measure how the agent's and node proxy's cost grows with the Services")
	}
	steps, err := ParseSteps(env.String("SVCLB_SCALE_STEPS", "1000,2000,5000,10000"))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Namespace: "scale", Endpoints: env.Positive("SVCLB_SCALE_ENDPOINTS", 10), Workers: 8}
	profile := env.On("SVCLB_SCALE_PROFILE")
	h, ctx, out := startRun(t, 110*time.Minute)

	g := &scaleresult.Growth{RunInfo: runInfo(t), EndpointsPer: spec.Endpoints, Workers: spec.Workers, Poll: growthPoll, KubeProxyPoll: growthKubeProxyPoll}
	if profile {
		g.Notes = append(g.Notes, "the agent serves no pprof: only the node proxy's heap is profiled")
	}
	save := saver(t, g, out)

	kp := h.startKubeProxy(t)
	ag, agentHTTP, sock := h.startAgent(t)
	var extra []string
	if profile {
		extra = append(extra, "--pprof")
	}
	px, admin := h.startNodeProxy(t, sock, extra...)
	procs := []*process{kp, ag, px}

	// What each holds on the empty cluster (Service kubernetes, the proxy's own clusters) is
	// subtracted from every step's target; it is taken once two looks 2 s apart agree.
	type counts struct {
		proxyActive, proxyWarming int64
		kpServices, kpEndpoints   int
	}
	look := func() (counts, error) {
		st, err := getStats("http://" + admin + "/stats")
		if err != nil {
			return counts{}, err
		}
		s, e, err := nftCounts(h.ns)
		return counts{st["cluster_manager.active_clusters"], st["cluster_manager.warming_clusters"], s, e}, err
	}
	var base, prev counts
	var state string
	waitFor(t, ctx, kp, func() bool {
		c, err := look()
		var st struct{ SnapshotVersion uint64 }
		aerr := getJSON("http://"+agentHTTP+"/status", &st)
		state = fmt.Sprintf("%+v (%v), agent snapshot %d (%v)", c, err, st.SnapshotVersion, aerr)
		ok := err == nil && aerr == nil && st.SnapshotVersion > 0 && c.proxyActive > 0 && c.proxyWarming == 0 && c == prev
		prev, base = c, c
		return ok
	}, &state)
	t.Logf("empty cluster: node proxy %d active clusters, kube-proxy %d Services / %d endpoint chains", base.proxyActive,
		base.kpServices, base.kpEndpoints)

	from := 0
	for _, n := range steps {
		spec.Services = n
		before := map[*process]CPU{}
		for _, p := range procs {
			before[p] = cpuOf(t, p)
		}
		pushesBefore, err := ParsePushes(agentMetrics(t, agentHTTP))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		progress := max((n-from)/4, 1)
		logProgress := func(done int) {
			if done%progress == 0 {
				t.Logf("step %d: created %d/%d new Services and their EndpointSlices (%s)", n, done, n-from, time.Since(start).Round(time.Second))
			}
		}
		if from == 0 { // the first step makes the namespace too
			err = Populate(ctx, h.kube, spec, logProgress)
		} else {
			err = Grow(ctx, h.kube, spec, from, logProgress)
		}
		if err != nil {
			g.Broke = fmt.Sprintf("creating step %d: %v", n, err)
			save()
			t.Fatal(err)
		}
		last := time.Now()
		st := scaleresult.GrowthStep{Services: n, Created: last.Sub(start)}

		wantProxy := base.proxyActive + int64(n)
		wantSvcs, wantEps := base.kpServices+n, base.kpEndpoints+n*spec.Endpoints
		var proxyState, kpState string
		var lastNft, lastLog time.Time
		tick := time.NewTicker(growthPoll)
		for st.Push == 0 || st.KubeProxy == 0 {
			if st.Push == 0 {
				s, err := getStats("http://" + admin + "/stats")
				a, w := s["cluster_manager.active_clusters"], s["cluster_manager.warming_clusters"]
				proxyState = fmt.Sprintf("node proxy: active %d of %d, warming %d", a, wantProxy, w)
				if err == nil && a >= wantProxy && w == 0 {
					st.Push = time.Since(last)
				}
			}
			if st.KubeProxy == 0 && time.Since(lastNft) >= growthKubeProxyPoll {
				lastNft = time.Now()
				s, e, err := nftCounts(h.ns)
				kpState = fmt.Sprintf("kube-proxy: service-ips %d of %d, endpoint chains %d of %d", s, wantSvcs, e, wantEps)
				if err == nil && s >= wantSvcs && e >= wantEps {
					st.KubeProxy = time.Since(last)
				}
			}
			if time.Since(last) > growthStepBound {
				if st.Push == 0 {
					g.Broke = fmt.Sprintf("step %d: not programmed %s after the last Create: %s; %s", n, growthStepBound, proxyState, kpState)
					save()
					t.Fatal(g.Broke)
				}
				g.Notes = append(g.Notes, fmt.Sprintf("step %d: kube-proxy not programmed within %s (%s)", n, growthStepBound, kpState))
				break
			}
			if time.Since(lastLog) > 30*time.Second && time.Since(last) > 30*time.Second {
				t.Logf("step %d after %s: %s; %s", n, time.Since(last).Round(time.Second), proxyState, kpState)
				lastLog = time.Now()
			}
			if st.Push > 0 && st.KubeProxy > 0 {
				break
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("step %d: gave up: %s; %s", n, proxyState, kpState)
			case <-kp.done:
				t.Fatalf("kube-proxy exited; log tail:\n%s", tail(kp.log, 30))
			case <-ag.done:
				t.Fatalf("svclb-agent exited; log tail:\n%s", tail(ag.log, 30))
			case <-px.done:
				t.Fatalf("svclb-nodeproxy exited; log tail:\n%s", tail(px.log, 30))
			}
		}
		tick.Stop()
		t.Logf("step %d: node proxy programmed %s after the last Create, kube-proxy %s (%s; %s)", n,
			st.Push.Round(10*time.Millisecond), st.KubeProxy.Round(100*time.Millisecond), proxyState, kpState)

		time.Sleep(growthSettle)
		body := agentMetrics(t, agentHTTP)
		p, err := ParsePushes(body)
		if err != nil {
			t.Fatal(err)
		}
		p = p.Sub(pushesBefore)
		st.Pushes, st.PushSeconds = p.Count, p.Seconds
		if st.AgentHeapInuse, err = ParseHeapInuse(body); err != nil {
			t.Fatal(err)
		}
		cost := func(p *process) scaleresult.ProcCost {
			m, err := ReadMemory(p.pid)
			if err != nil {
				t.Fatal(err)
			}
			return scaleresult.ProcCost{Memory: m, CPUSeconds: cpuOf(t, p).Sub(before[p]).Total().Seconds()}
		}
		st.Agent, st.NodeProxy, st.KubeProxyCost = cost(ag), cost(px), cost(kp)
		var as struct{ Clusters, Endpoints int }
		if err := getJSON("http://"+agentHTTP+"/status", &as); err != nil {
			t.Fatal(err)
		}
		st.AgentClusters, st.AgentEndpoints = as.Clusters, as.Endpoints
		st.LoadAfter = loadavg(t)
		if profile { // after the memory reading: ?gc=1 collects first
			st.NodeProxyHeap = fmt.Sprintf("growth-%d-nodeproxy.heap.pb.gz", n)
			if err := download("http://"+admin+"/debug/pprof/heap?gc=1", filepath.Join(out, st.NodeProxyHeap)); err != nil {
				t.Fatal(err)
			}
		}
		g.Steps = append(g.Steps, st)
		g.Duration = time.Since(g.Started)
		save()
		t.Logf("after step %d (%d endpoints each; push time's floor: the %s poll):\n%s", n, spec.Endpoints, growthPoll, g.Table())
		from = n
	}
	g.LoadAfter = loadavg(t)
	g.Duration = time.Since(g.Started)
	save()
	t.Logf("how cost grows, %d endpoints per Service, load %.2f → %.2f (1 min) on %d CPUs; %s in %s\n%s", spec.Endpoints,
		g.LoadBefore[0], g.LoadAfter[0], g.CPUs, scaleresult.GrowthFile, out, g.Table())
}

func loadavg(t *testing.T) [3]float64 {
	l, err := ReadLoadavg()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func cpuOf(t *testing.T, p *process) CPU {
	c, err := ReadCPU(p.pid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agentMetrics scrapes the agent's /metrics.
func agentMetrics(t *testing.T, agentHTTP string) []byte {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + agentHTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("agent metrics: %v", err)
	}
	return b
}

// download saves url's body to path.
func download(url, path string) error {
	c := http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return f.Close()
}
