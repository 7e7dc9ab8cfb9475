package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestOnDemand is "on-demand first-connection latency" (docs/perf.md, "How cost grows"): the
// agent in on-demand CDS mode and the node proxy serve one captured pod (podNet, as TestHeld);
// SVCLB_SCALE_DEMANDED (default 10,5000) are how many Services are already demanded, each level
// with a fresh agent and proxy whose demand file names that many (the agent's restart path:
// the names restored before its first snapshot, the proxy receiving them on its wildcard CDS).
// At each level SVCLB_SCALE_FIRST connections (default 100) go each to its own Service not yet
// demanded, whose cluster the proxy then asks the agent for (tcp_proxy on_demand), and as many
// to Services already demanded, both at SVCLB_SCALE_FIRST_RATE per second (default 4, open
// loop): setup to first byte of each. Every Service has SVCLB_SCALE_ENDPOINTS echo servers
// (default 4). It logs a table and rewrites OnDemandFile in the perf results directory;
// SVCLB_SCALE_PROFILE=1 also saves the node proxy's CPU profile over the first connections.
func TestOnDemand(t *testing.T) {
	if !env.On("SVCLB_SCALE") {
		t.Skip("set SVCLB_SCALE=1 (make scale-ondemand) to measure first connections through the node proxy in on-demand CDS mode")
	}
	levels, err := ParseSteps(env.String("SVCLB_SCALE_DEMANDED", "10,5000"))
	if err != nil {
		t.Fatal(err)
	}
	endpoints := env.Positive("SVCLB_SCALE_ENDPOINTS", 4)
	conns := env.Positive("SVCLB_SCALE_FIRST", 100)
	rate := env.Float("SVCLB_SCALE_FIRST_RATE", 4)
	profile := env.On("SVCLB_SCALE_PROFILE")
	if rate <= 0 {
		t.Fatalf("SVCLB_SCALE_FIRST_RATE=%g: want a positive rate", rate)
	}
	h, ctx, out := startRun(t, 50*time.Minute)

	const ns = "ondemand"
	pod := startPod(t, ctx, h, ns, endpoints)
	total := levels[len(levels)-1] + conns
	start := time.Now()
	vips, err := createEchoServices(ctx, h.kube, ns, total, pod.backends, func(done int) {
		if done%max(total/5, 1) == 0 {
			t.Logf("created %d/%d Services and their EndpointSlices (%s)", done, total, time.Since(start).Round(time.Second))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &scaleresult.OnDemand{RunInfo: runInfo(t), Services: total, Endpoints: endpoints, Conns: conns, Rate: rate, Timeout: heldTimeout}
	g.Notes = append(g.Notes, fmt.Sprintf("%d Services created in %s", total, time.Since(start).Round(time.Second)))
	save := saver(t, g, out)
	probe := pod.echo
	demandFile := filepath.Join(h.dir, "demand.json")
	var ag, px *process
	for _, n := range levels {
		if px != nil { // each level starts afresh: the proxy first, as a node's restart would
			px.stop()
			ag.stop()
		}
		if err := writeDemandFile(demandFile, vips[:n]); err != nil {
			t.Fatal(err)
		}
		l := scaleresult.OnDemandLevel{Demanded: n}
		began := time.Now()
		var agentHTTP, sock, admin string
		ag, agentHTTP, sock = h.startAgent(t, "--service-range="+testenv.ServiceClusterIPRange, "--cds="+string(agentstatus.CDSOnDemand),
			"--demand-file="+demandFile)
		var extra []string
		if profile {
			extra = append(extra, "--pprof")
		}
		px, admin = h.startNodeProxy(t, sock, extra...)
		var state string
		waitFor(t, ctx, px, func() bool {
			var st agentstatus.Status
			aerr := getJSON("http://"+agentHTTP+"/status", &st)
			s, err := getStats("http://" + admin + "/stats")
			a, w := s["cluster_manager.active_clusters"], s["cluster_manager.warming_clusters"]
			state = fmt.Sprintf("agent cds %q demanded %d (%v); proxy active %d warming %d (%v)", st.CDS, st.Demanded, aerr, a, w, err)
			return aerr == nil && err == nil && st.CDS == agentstatus.CDSOnDemand && st.Demanded == n && a >= int64(n) && w == 0
		}, &state)
		// The listener bound too: a demanded Service answers.
		var last error
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			if _, last = probe(vips[0]); last == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("level %d: no echo through %s within 2m: %v; node proxy log:\n%s", n, vips[0], last, tail(px.log, 20))
			}
		}
		l.Ready = time.Since(began)
		// A warm-up on demanded Services, not recorded.
		if _, errs, _, err := OpenLoop(ctx, 20, rate, func(context.Context) (time.Time, error) { return probe(vips[0]) }); err != nil || len(errs) > 0 {
			t.Fatalf("level %d warm-up: %v %v", n, errors.Join(errs...), err)
		}

		attempts := func() int64 {
			s, err := getStats("http://" + admin + "/stats")
			if err != nil {
				t.Fatal(err)
			}
			return s["tcp."+contract.ChainSvc+".on_demand_cluster_attempt"]
		}
		a0 := attempts()
		p0, err := ParsePushes(agentMetrics(t, agentHTTP))
		if err != nil {
			t.Fatal(err)
		}
		var next atomic.Int64
		profiled := make(chan error, 1)
		if profile { // the node proxy's CPU over the first connections (the agent serves no pprof)
			l.NodeProxyCPUProfile = fmt.Sprintf("ondemand-%d-nodeproxy.cpu.pb.gz", n)
			secs := max(int(float64(conns)/rate), 1)
			go func() {
				profiled <- download(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, secs), filepath.Join(out, l.NodeProxyCPUProfile))
			}()
		} else {
			profiled <- nil
		}
		lat, errs, _, err := OpenLoop(ctx, conns, rate, func(context.Context) (time.Time, error) {
			return probe(vips[n+int(next.Add(1)-1)]) // each to a Service of its own, not demanded
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-profiled; err != nil {
			t.Fatal(err)
		}
		l.Attempts = attempts() - a0
		p1, err := ParsePushes(agentMetrics(t, agentHTTP))
		if err != nil {
			t.Fatal(err)
		}
		p1 = p1.Sub(p0)
		l.Pushes, l.PushSeconds = p1.Count, p1.Seconds
		l.First, l.FirstErrors = scaleresult.Summarize(lat), len(errs)
		var samples []error
		samples = append(samples, errs[:min(len(errs), heldErrorSamples)]...)
		next.Store(0)
		lat, errs, _, err = OpenLoop(ctx, conns, rate, func(context.Context) (time.Time, error) {
			return probe(vips[int(next.Add(1)-1)%n]) // demanded since the start
		})
		if err != nil {
			t.Fatal(err)
		}
		l.Known, l.KnownErrors = scaleresult.Summarize(lat), len(errs)
		samples = append(samples, errs[:min(len(errs), heldErrorSamples)]...)
		for _, e := range samples {
			l.ErrorSamples = append(l.ErrorSamples, e.Error())
		}
		var st agentstatus.Status
		if err := getJSON("http://"+agentHTTP+"/status", &st); err != nil {
			t.Fatal(err)
		}
		l.DemandedAfter = st.Demanded
		if l.Agent, err = ReadMemory(ag.pid); err != nil {
			t.Fatal(err)
		}
		if l.NodeProxy, err = ReadMemory(px.pid); err != nil {
			t.Fatal(err)
		}
		l.LoadAfter = loadavg(t)
		g.Levels = append(g.Levels, l)
		g.Duration = time.Since(g.Started)
		save()
		t.Logf("with %d demanded: %d first connections and %d to demanded Services at %g/s:\n%s", n, conns, conns, rate, g.Table())
	}
	g.LoadAfter = loadavg(t)
	g.Duration = time.Since(g.Started)
	save()
	t.Logf("on-demand first connections, %d Services × %d echo servers, %d of each kind at %g/s (open loop), load %.2f → %.2f (1 min) on %d CPUs; %s in %s\n%s",
		total, endpoints, conns, rate, g.LoadBefore[0], g.LoadAfter[0], g.CPUs, scaleresult.OnDemandFile, out, g.Table())
}

// writeDemandFile writes the agent's demand file (agent/demandfile.go's format, version 1)
// naming the svc: cluster of each VIP:port: what an agent restarted with those demanded reads.
func writeDemandFile(path string, vips []netip.AddrPort) error {
	f := struct {
		Version  int      `json:"version"`
		Clusters []string `json:"clusters"`
	}{Version: 1, Clusters: []string{}}
	for _, v := range vips {
		f.Clusters = append(f.Clusters, contract.ClusterName(v.Addr(), v.Port()))
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("demand file: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("demand file: %w", err)
	}
	return nil
}

// createEchoServices creates n Services echo-00000… in ns, 8 at a time, each as
// createEchoService makes it, and returns their VIP:ports in order; progress (may be nil) is
// called with the number done after each. It stops at the first error.
func createEchoServices(ctx context.Context, kube kubernetes.Interface, ns string, n int, addrs []netip.Addr, progress func(done int)) ([]netip.AddrPort, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	vips := make([]netip.AddrPort, n)
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				v, err := createEchoService(ctx, kube, ns, fmt.Sprintf("echo-%05d", i), addrs)
				if err != nil {
					cancel(err)
					return
				}
				vips[i] = v
				if d := done.Add(1); progress != nil {
					progress(int(d))
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("creating Services, %d of %d done: %w", done.Load(), n, context.Cause(ctx))
	}
	return vips, nil
}
