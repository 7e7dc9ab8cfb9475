package scale

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
)

// TestCreateCPU is the other half of the CPU goal (docs/perf.md): kube-proxy, the agent and the node
// proxy it feeds run first, on an empty cluster, and then the Services are created (8 at a time,
// as fast as the apiserver takes them), the way a cluster fills while they run; TestRSS starts
// them once every object exists. Each is waited for until it has programmed everything; the CPU
// it used is read from just before the first creation. SVCLB_SCALE_SERVICES (default 5000) and
// SVCLB_SCALE_ENDPOINTS (default 3) set the size.
func TestCreateCPU(t *testing.T) {
	spec, h, ctx := startScale(t, "to compare the agent's CPU with kube-proxy's while Services are created", 5000, 3)

	kp := h.startKubeProxy(t)
	ag, agentHTTP, sock := h.startAgent(t)
	px, proxyAdmin := h.startNodeProxy(t, sock)
	// Up and idle before anything is created: the window starts with everyone ready.
	var state string
	waitFor(t, ctx, kp, func() bool {
		_, err := getStats("http://" + proxyAdmin + "/stats")
		var st struct{ SnapshotVersion uint64 }
		aerr := getJSON("http://"+agentHTTP+"/status", &st)
		_, _, nerr := nftCounts(h.ns)
		state = fmt.Sprintf("proxy %v, agent %v (snapshot %d), kube-proxy table %v", err, aerr, st.SnapshotVersion, nerr)
		return err == nil && aerr == nil && st.SnapshotVersion > 0 && nerr == nil
	}, &state)
	procs := []*process{kp, ag, px}
	before := map[*process]CPU{}
	for _, p := range procs {
		c, err := ReadCPU(p.pid)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = c
	}

	start := time.Now()
	created := make(chan error, 1)
	step := max(spec.Services/5, 1)
	go func() {
		created <- Populate(ctx, h.kube, spec, func(done int) {
			if done%step == 0 {
				t.Logf("created %d/%d Services and their EndpointSlices (%s)", done, spec.Services, time.Since(start).Round(time.Second))
			}
		})
	}()
	wantEndpoints := spec.Services * spec.Endpoints
	done := map[*process]time.Duration{}
	cpu := map[*process]CPU{}
	check := map[*process]func() (bool, string){
		kp: func() (bool, string) {
			svcs, eps, err := nftCounts(h.ns)
			return err == nil && svcs >= spec.Services && eps >= wantEndpoints, fmt.Sprintf("kube-proxy: service-ips %d, endpoint chains %d", svcs, eps)
		},
		ag: func() (bool, string) {
			var st struct{ Clusters, Endpoints int }
			err := getJSON("http://"+agentHTTP+"/status", &st)
			return err == nil && st.Clusters > spec.Services && st.Endpoints >= wantEndpoints, fmt.Sprintf("agent: clusters %d, endpoints %d", st.Clusters, st.Endpoints)
		},
		px: func() (bool, string) {
			st, err := getStats("http://" + proxyAdmin + "/stats")
			a, w := st["cluster_manager.active_clusters"], st["cluster_manager.warming_clusters"]
			return err == nil && a > int64(spec.Services)+1 && w == 0, fmt.Sprintf("node proxy: active %d, warming %d", a, w)
		},
	}
	var createdIn time.Duration
	waitFor(t, ctx, kp, func() bool {
		if createdIn == 0 {
			select {
			case err := <-created:
				if err != nil {
					t.Fatal(err)
				}
				createdIn = time.Since(start)
				t.Logf("all %d Services created in %s", spec.Services, createdIn.Round(time.Second))
			default:
			}
		}
		var says []string
		for _, p := range procs {
			if _, ok := done[p]; ok {
				continue
			}
			ok, s := check[p]()
			says = append(says, s)
			if ok {
				done[p] = time.Since(start)
				c, err := ReadCPU(p.pid)
				if err != nil {
					t.Fatal(err)
				}
				cpu[p] = c.Sub(before[p])
			}
		}
		state = strings.Join(says, "; ")
		return createdIn > 0 && len(done) == len(procs)
	}, &state)

	var b strings.Builder
	fmt.Fprintf(&b, "\n%d Services × %d endpoints created in %s while the programs ran (from an empty cluster)\n", spec.Services, spec.Endpoints, createdIn.Round(time.Second))
	fmt.Fprintf(&b, "%-34s %14s %10s %12s %10s %10s\n", "process", "programmed at", "CPU s", "CPU s/1k svc", "VmRSS MiB", "VmHWM MiB")
	for _, r := range []struct {
		name string
		p    *process
	}{{"kube-proxy v1.34.4 (nftables)", kp}, {"svclb-agent (proactive CDS)", ag}, {"svclb-nodeproxy (fed by the agent)", px}} {
		m, err := ReadMemory(r.p.pid)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%-34s %14s %10.2f %12.3f %10s %10s\n", r.name, done[r.p].Round(100*time.Millisecond), cpu[r.p].Total().Seconds(),
			perThousand(cpu[r.p].Total(), spec.Services), scaleresult.MiB(m.RSS), scaleresult.MiB(m.HWM))
	}
	fmt.Fprintf(&b, "CPU while created: kube-proxy %.2f s (itself %.2f, its nft runs %.2f); agent/kube-proxy %.3f, (agent+node proxy)/kube-proxy %.3f\n",
		cpu[kp].Total().Seconds(), cpu[kp].Self.Seconds(), cpu[kp].Children.Seconds(),
		float64(cpu[ag].Total())/float64(cpu[kp].Total()), float64(cpu[ag].Total()+cpu[px].Total())/float64(cpu[kp].Total()))
	t.Log(b.String())
}
