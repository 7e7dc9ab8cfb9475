package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestRSS is the RSS goal's figure: kube-proxy (nftables) vs the agent (and the built-in node proxy
// it feeds) at the same scale, each started once every object exists (a node joining a big
// cluster), each waited for until it has programmed everything. One run, printed as a table.
func TestRSS(t *testing.T) {
	spec, h, ctx := startScale(t, "(make scale) to compare the agent's RSS with kube-proxy's at 10k Services / 100k endpoints", 10000, 10)
	kube, ns, dir, kubeconfig := h.kube, h.ns, h.dir, h.kubeconfig
	const node = harnessNode

	start := time.Now()
	step := max(spec.Services/10, 1)
	if err := Populate(ctx, kube, spec, func(done int) {
		if done%step == 0 {
			t.Logf("created %d/%d Services and their EndpointSlices (%s)", done, spec.Services, time.Since(start).Round(time.Second))
		}
	}); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	wantEndpoints := spec.Services * spec.Endpoints
	t.Logf("apiserver: %d Services + %d EndpointSlices (%d endpoints) created in %s (%.0f objects/s, %d workers)",
		spec.Services, spec.Services, wantEndpoints, created.Round(time.Millisecond), float64(2*spec.Services)/created.Seconds(), spec.Workers)

	type row struct {
		name    string
		pid     int
		ready   time.Duration
		reached string
		cpu     CPU // used from its start until it had programmed everything
	}
	var rows []row
	cpuNow := func(pid int) CPU {
		c, err := ReadCPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	p := h.startKubeProxy(t)
	var kpState string
	d := waitFor(t, ctx, p, func() bool {
		svcs, eps, err := nftCounts(ns)
		kpState = fmt.Sprintf("service-ips elements %d, endpoint chains %d", svcs, eps)
		return err == nil && svcs >= spec.Services && eps >= wantEndpoints
	}, &kpState)
	rows = append(rows, row{"kube-proxy v1.34.4 (nftables)", p.pid, d, kpState, cpuNow(p.pid)})
	kpMetrics := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (c net.Conn, err error) {
			err = ns.Do(func() error { c, err = net.Dial(network, addr); return err }) // its metrics port is in ns
			return c, err
		}}}
	t.Logf("kube-proxy: %s", metrics(t, kpMetrics, "http://127.0.0.1:10249/metrics",
		`kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`, `kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
		`kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`, `kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}`))

	p, agentHTTP, sock := h.startAgent(t)
	netnsDir := filepath.Join(dir, "netns")
	var agentState string
	d = waitFor(t, ctx, p, func() bool {
		var st struct{ Clusters, Endpoints int }
		err := getJSON("http://"+agentHTTP+"/status", &st)
		agentState = fmt.Sprintf("/status clusters %d, endpoints %d", st.Clusters, st.Endpoints)
		return err == nil && st.Clusters > spec.Services && st.Endpoints >= wantEndpoints // + blackhole, passthrough_original_dst
	}, &agentState)
	rows = append(rows, row{"svclb-agent (proactive CDS)", p.pid, d, agentState, cpuNow(p.pid)})
	t.Logf("svclb-agent: %s", metrics(t, http.DefaultClient, "http://"+agentHTTP+"/metrics",
		contract.MetricPushDuration+"_sum", contract.MetricPushDuration+"_count"))

	p, proxyAdmin := h.startNodeProxy(t, sock)
	var proxyState string
	d = waitFor(t, ctx, p, func() bool {
		// Its cluster_manager gauges, as Envoy names them: an EDS cluster
		// stays warming until its assignment arrives, so every cluster
		// active and none warming means every Service's endpoints are in.
		// (Polling the config dump instead, a JSON of tens of MB at this
		// size, would cost the proxy more than programming does.)
		st, err := getStats("http://" + proxyAdmin + "/stats")
		active, warming := st["cluster_manager.active_clusters"], st["cluster_manager.warming_clusters"]
		proxyState = fmt.Sprintf("/stats active clusters %d, warming %d", active, warming)
		return err == nil && active > int64(spec.Services)+1 && warming == 0 // + passthrough_original_dst, xds_cluster
	}, &proxyState)
	rows = append(rows, row{"svclb-nodeproxy (fed by the agent)", p.pid, d, proxyState, cpuNow(p.pid)})

	if env.On("SVCLB_SCALE_ONDEMAND") {
		// The same binary in on-demand CDS mode with no proxy, hence no demand: what the agent
		// holds for a node whose pods use nothing (informers and index, passthrough only).
		odHTTP := freeAddr(t)
		p = startProcess(t, dir, "svclb-agent-ondemand", exec.Command(filepath.Join(dir, "svclb-agent"), "--node-name="+node,
			"--kubeconfig="+kubeconfig, "--xds-socket="+filepath.Join(dir, "run", "od.sock"), "--http="+odHTTP,
			"--netns-dir="+netnsDir, "--log-level=warn", "--cds=on-demand", "--demand-file="))
		var odState string
		d = waitFor(t, ctx, p, func() bool {
			var st struct {
				CDS                string
				Clusters, Demanded int
				SnapshotVersion    uint64
			}
			err := getJSON("http://"+odHTTP+"/status", &st)
			odState = fmt.Sprintf("/status cds %q, clusters %d, demanded %d", st.CDS, st.Clusters, st.Demanded)
			return err == nil && st.CDS == "on-demand" && st.SnapshotVersion > 0 && st.Clusters == 2 // blackhole, passthrough_original_dst
		}, &odState)
		rows = append(rows, row{"svclb-agent (on-demand CDS, no demand)", p.pid, d, odState, cpuNow(p.pid)})
	}

	// Let each settle (GC, the proxy's ACKs) before reading resident memory.
	time.Sleep(10 * time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d Services × %d endpoints (apiserver: created in %s)\n", spec.Services, spec.Endpoints, created.Round(time.Second))
	fmt.Fprintf(&b, "%-40s %10s %10s %10s %10s %12s  %s\n", "process", "VmRSS MiB", "VmHWM MiB", "ready in", "CPU s", "CPU s/1k svc", "programmed")
	mem := map[int]scaleresult.Memory{}
	for _, r := range rows {
		m, err := ReadMemory(r.pid)
		if err != nil {
			t.Fatal(err)
		}
		mem[r.pid] = m
		fmt.Fprintf(&b, "%-40s %10s %10s %10s %10.2f %12.3f  %s\n", r.name, scaleresult.MiB(m.RSS), scaleresult.MiB(m.HWM), r.ready.Round(100*time.Millisecond),
			r.cpu.Total().Seconds(), perThousand(r.cpu.Total(), spec.Services), r.reached)
	}
	kp, ag, px := mem[rows[0].pid], mem[rows[1].pid], mem[rows[2].pid]
	fmt.Fprintf(&b, "agent/kube-proxy: VmRSS %.2f, VmHWM %.2f; (agent+node proxy)/kube-proxy: VmRSS %.2f, VmHWM %.2f\n",
		ratio(ag.RSS, kp.RSS), ratio(ag.HWM, kp.HWM), ratio(ag.RSS+px.RSS, kp.RSS), ratio(ag.HWM+px.HWM, kp.HWM))
	kpCPU, agCPU, pxCPU := rows[0].cpu, rows[1].cpu, rows[2].cpu
	fmt.Fprintf(&b, "CPU to programmed: kube-proxy %.2f s (itself %.2f, its nft runs %.2f), agent %.2f s, node proxy %.2f s; "+
		"agent/kube-proxy %.3f, (agent+node proxy)/kube-proxy %.3f\n",
		kpCPU.Total().Seconds(), kpCPU.Self.Seconds(), kpCPU.Children.Seconds(), agCPU.Total().Seconds(), pxCPU.Total().Seconds(),
		float64(agCPU.Total())/float64(kpCPU.Total()), float64(agCPU.Total()+pxCPU.Total())/float64(kpCPU.Total()))
	if len(rows) > 3 {
		od := mem[rows[3].pid]
		fmt.Fprintf(&b, "on-demand agent/kube-proxy: VmRSS %.2f, VmHWM %.2f\n", ratio(od.RSS, kp.RSS), ratio(od.HWM, kp.HWM))
	}
	t.Log(b.String())
}

func ratio(a, b uint64) float64 { return float64(a) / float64(b) }

// perThousand is CPU seconds per 1,000 Services.
func perThousand(d time.Duration, services int) float64 {
	return d.Seconds() * 1000 / float64(services)
}

// env is the scale tests' settings (SVCLB_SCALE=1 runs them).
var env kit.Env

// startScale skips t unless SVCLB_SCALE=1 (why: what the test compares), reads the size
// (SVCLB_SCALE_SERVICES and SVCLB_SCALE_ENDPOINTS, positive; these defaults otherwise) and
// starts the harness, with a context bounded at 50 minutes.
func startScale(t *testing.T, why string, services, endpoints int) (Spec, *harness, context.Context) {
	t.Helper()
	if !env.On("SVCLB_SCALE") {
		t.Skip("set SVCLB_SCALE=1 " + why)
	}
	spec := Spec{Namespace: "scale", Services: env.Positive("SVCLB_SCALE_SERVICES", services),
		Endpoints: env.Positive("SVCLB_SCALE_ENDPOINTS", endpoints), Workers: 8}
	if err := env.Err(); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	t.Cleanup(cancel)
	return spec, h, ctx
}

// build compiles the repository's binaries into dir.
func build(t *testing.T, dir string, pkgs ...string) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", pkgs, err, out)
	}
}

// freeAddr returns a loopback address that was free a moment ago (the children take flags, not
// listeners).
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type process struct {
	name, log string
	pid       int
	done      chan struct{}
	// stop interrupts the process (then kills it) and waits for it; cleanup calls it too.
	stop func()
}

// startProcess starts cmd with its output in dir/<name>.log; it is interrupted (then killed) by
// p.stop or at cleanup, and the log's tail is shown if the test failed.
func startProcess(t *testing.T, dir, name string, cmd *exec.Cmd) *process {
	p := &process{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// A test killed by -timeout runs no cleanup: take the child along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
			if t.Failed() {
				t.Logf("%s log tail:\n%s", name, tail(p.log, 30))
			}
		})
	}
	t.Cleanup(p.stop)
	return p
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// waitFor polls ok every 2 s until it holds, and returns how long that took since p started.
// *state describes progress (logged every 30 s and on failure).
func waitFor(t *testing.T, ctx context.Context, p *process, ok func() bool, state *string) time.Duration {
	start := time.Now()
	lastLog := start
	for !ok() {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it programmed everything (%s); log tail:\n%s", p.name, *state, tail(p.log, 30))
		case <-ctx.Done():
			t.Fatalf("%s: gave up after %s at %s", p.name, time.Since(start).Round(time.Second), *state)
		case <-time.After(2 * time.Second):
		}
		if time.Since(lastLog) > 30*time.Second {
			t.Logf("%s after %s: %s", p.name, time.Since(start).Round(time.Second), *state)
			lastLog = time.Now()
		}
	}
	d := time.Since(start)
	t.Logf("%s programmed everything in %s: %s", p.name, d.Round(100*time.Millisecond), *state)
	return d
}

// getStats reads an Envoy-style /stats text page ("name: value" lines).
func getStats(url string) (map[string]int64, error) {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, ": ")
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); ok && err == nil {
			out[name] = n
		}
	}
	return out, nil
}

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// metrics returns the named samples (name value, …) from a Prometheus text endpoint, so the
// log says where the time went (a missing name shows as "?").
func metrics(t *testing.T, c *http.Client, url string, names ...string) string {
	resp, err := c.Get(url)
	if err != nil {
		t.Logf("metrics %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Logf("metrics %s: %v", url, err)
	}
	vals := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			vals[f[0]] = f[1]
		}
	}
	var out []string
	for _, n := range names {
		v, ok := vals[n]
		if !ok {
			v = "?"
		}
		out = append(out, n+" "+v)
	}
	return strings.Join(out, ", ")
}

// nftCounts counts kube-proxy's service-ips map elements and endpoint chains in ns.
func nftCounts(ns *netnstest.NS) (services, endpoints int, err error) {
	out, err := ns.Command("nft", "list", "map", "ip", "kube-proxy", "service-ips").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("nft list map: %w", err)
	}
	services = bytes.Count(out, []byte(": goto service-"))
	out, err = ns.Command("nft", "list", "chains", "ip").Output() // only kube-proxy has a table in ns
	if err != nil {
		return services, 0, fmt.Errorf("nft list chains: %w", err)
	}
	return services, bytes.Count(out, []byte("chain endpoint-")), nil
}
