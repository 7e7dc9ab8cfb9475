package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/perf/internal/connload"
	"github.com/aether-mesh/svclb/e2e/perf/internal/nodestat"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/perf/internal/tcpstat"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The data-plane runs' shape, chosen so that the four paths fit in about
// five minutes on a 2-core machine and no path runs the client out of
// ephemeral ports (each closed connection holds one in TIME_WAIT for a
// minute; the default range has 28,232): at most dataClosedConns + the open
// loop's per destination.
const (
	dataConcurrency = 8
	dataClosedFor   = 5 * time.Second
	dataClosedConns = 10000
	dataBulkFor     = 5 * time.Second
	dataTimeout     = 2 * time.Second
)

// phase0Config is path (c)'s: the agent passes a meshed pod's Service
// traffic through to kube-proxy (Phase 0); Phase 2 is off with it, so
// nothing in the Service range is refused instead.
var phase0Config = map[string]string{contract.KeyPhase1: "false", contract.KeyPhase2: "false", contract.KeyCDS: "proactive"}

// dataPath is one path to measure: who dials what, under which agent config.
type dataPath struct {
	key, name string
	client    *corev1.Pod
	to        string
	config    map[string]string
	// profile: take the node proxy's CPU profile during the open loop.
	profile bool
}

// TestDataplane is "what a connection costs": the same clients and backend
// (podA) through four paths, each measured the same way (connload), the node
// proxy's CPU on the clients' node read around each part.
func TestDataplane(t *testing.T) {
	needCluster(t)
	if !cfg.data {
		t.Skip("the data-plane figure runs with make perf DATA=1 (SVCLB_PERF_DATA=1)")
	}
	ctx := context.Background()
	w := suite.w
	podIP, err := podIPOf(ctx, podA)
	if err != nil {
		t.Fatal(err)
	}
	wire := fmt.Sprintf("%s:%d", podIP, workload.EchoPort)
	paths := []dataPath{
		{result.PathWire, "wire: plain pod → pod IP", w.plain, wire, nil, false},
		{result.PathKubeProxy, "kube-proxy: plain pod → ClusterIP", w.plain, w.kubeProxyTo(), nil, false},
		{result.PathPhase0, "meshed, Phase 1 off: node proxy → kube-proxy", w.meshed, w.kubeProxyTo(), phase0Config, false},
		// The guarded Service: kube-proxy has no entry for it, so a reply
		// proves the node proxy went to the endpoint itself.
		{result.PathPhase1, "meshed, Phase 1 on: node proxy → endpoint", w.meshed, w.agentTo(), onConfig, pprofOn()},
	}
	proc := procNodeProxy
	if cfg.Proxy == manifests.ProxyEnvoy {
		proc = "envoy"
	}
	node := w.meshed.Spec.NodeName
	d := &result.Dataplane{Header: header(), Node: node,
		CPUSource: fmt.Sprintf("the %s container's cgroup CPU counter (cpu.stat usage_usec, read on the node)", proc)}
	// Whatever happens, the suite's other tests and the cleanup find the agent as set up.
	defer func() {
		if err := agent.SetConfig(ctx, suite.cluster, maps.Clone(onConfig)); err != nil {
			t.Errorf("agent config back on: %v", err)
		}
	}()
	// A path that fails is said in the notes; the others are still measured and written.
	for _, p := range paths {
		if p.config != nil {
			if err := agent.SetConfig(ctx, suite.cluster, maps.Clone(p.config)); err != nil {
				t.Errorf("(%s): %v", p.key, err)
				d.Notes = append(d.Notes, fmt.Sprintf("(%s) not measured: %v", p.key, err))
				continue
			}
		}
		dp, err := measurePath(ctx, p, node, proc)
		if err != nil {
			t.Errorf("(%s) %s: %v", p.key, p.name, err)
			d.Notes = append(d.Notes, fmt.Sprintf("(%s) not measured: %v", p.key, err))
			continue
		}
		progress("dataplane (%s) %s: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms (%d failed); %.0f conns/s; %.0f / %.0f MiB/s; node proxy %.3f CPU s / 1,000 conns, %.3f / GiB",
			p.key, p.name, dp.Open.Latency.P50, dp.Open.Latency.P99, dp.Open.Latency.P999, dp.Open.Latency.Failed,
			dp.Closed.PerSecond, dp.Bulk1.MiBps, dp.Bulk8.MiBps, dp.CPUPerKConn(), dp.CPUPerGiB())
		d.Paths = append(d.Paths, dp)
	}
	if pprofOn() {
		d.Notes = append(d.Notes, fmt.Sprintf("The node proxy's CPU profile during (d)'s open loop (%s): %s, its top entries in %s.",
			profileFor, profileFile(result.PathPhase1), profileFile(result.PathPhase1)+".top.txt"))
	}
	finish(&d.Header)
	if err := result.Write(cfg.Artifacts, result.DataplaneFile, d); err != nil {
		t.Fatal(err)
	}
}

// measurePath probes the path once (the peer the backend saw), then runs
// the closed loop, both bulk runs and the open loop, reading the node
// proxy's CPU between them.
func measurePath(ctx context.Context, p dataPath, node, proc string) (result.DataPath, error) {
	dp := result.DataPath{Key: p.key, Name: p.name, Client: p.client.Name, To: p.to}
	peer, err := probe(ctx, p.client, p.to)
	if err != nil {
		return dp, err
	}
	dp.Peer = peer
	if err := loadRun(ctx, p, &dp.Closed, "-mode=closed", "-concurrency="+strconv.Itoa(dataConcurrency),
		"-duration="+dataClosedFor.String(), "-n="+strconv.Itoa(dataClosedConns)); err != nil {
		return dp, err
	}
	cpu0, err := readProc(ctx, node, proc)
	if err != nil {
		return dp, err
	}
	for _, b := range []struct {
		streams int
		into    *connload.BulkResult
	}{{1, &dp.Bulk1}, {8, &dp.Bulk8}} {
		if err := loadRun(ctx, p, b.into, "-mode=bulk", "-streams="+strconv.Itoa(b.streams), "-duration="+dataBulkFor.String()); err != nil {
			return dp, err
		}
	}
	cpu1, err := readProc(ctx, node, proc)
	if err != nil {
		return dp, err
	}
	var prof chan error
	if p.profile {
		prof = make(chan error, 1)
		go func() { prof <- profile(ctx, node, p.key) }()
	}
	tcp0, err := tcpCounters(ctx, p)
	if err != nil {
		return dp, err
	}
	m0, err := nodestat.ReadMachine(ctx, nodeExec, node)
	if err != nil {
		return dp, err
	}
	if err := loadRun(ctx, p, &dp.Open, "-mode=open", "-rate="+strconv.FormatFloat(cfg.dataRate, 'g', -1, 64), "-n="+strconv.Itoa(cfg.dataConns)); err != nil {
		return dp, err
	}
	tcp1, err := tcpCounters(ctx, p)
	if err != nil {
		return dp, err
	}
	dp.OpenTCP = tcpstat.Delta(tcp0, tcp1)
	m1, err := nodestat.ReadMachine(ctx, nodeExec, node)
	if err != nil {
		return dp, err
	}
	dp.OpenNodeBusy, dp.OpenNodeSteal = nodestat.Shares(m0, m1)
	if prof != nil {
		if err := <-prof; err != nil {
			return dp, err
		}
	}
	cpu2, err := readProc(ctx, node, proc)
	if err != nil {
		return dp, err
	}
	if cpu0.PID != cpu2.PID {
		return dp, fmt.Errorf("the node proxy on %s restarted during the path (pid %d, then %d)", node, cpu0.PID, cpu2.PID)
	}
	dp.ProxyCPUBulk, dp.ProxyCPUOpen = (cpu1.CPU - cpu0.CPU).Seconds(), (cpu2.CPU - cpu1.CPU).Seconds()
	return dp, nil
}

// loadRun runs perf-client load in the path's client and decodes its result.
func loadRun(ctx context.Context, p dataPath, into any, args ...string) error {
	return clientJSON(ctx, p, into, append([]string{"load", "-to=" + p.to, "-timeout=" + dataTimeout.String()}, args...)...)
}

// tcpCounters reads the TCP counters of the path's client's netns.
func tcpCounters(ctx context.Context, p dataPath) (tcpstat.Counters, error) {
	var c tcpstat.Counters
	return c, clientJSON(ctx, p, &c, "tcpstat")
}

// clientJSON runs perf-client args in the path's client and decodes the one
// JSON document it prints.
func clientJSON(ctx context.Context, p dataPath, into any, args ...string) error {
	cmd := append([]string{"/perf-client"}, args...)
	out, stderr, err := suite.cluster.Exec(ctx, p.client.Namespace, p.client.Name, workload.ClientContainer, cmd...)
	if err != nil {
		return fmt.Errorf("perf-client %s: %w (%s)", strings.Join(args, " "), err, strings.TrimSpace(stderr))
	}
	if err := json.Unmarshal([]byte(out), into); err != nil {
		return fmt.Errorf("perf-client %s: %w in %q", strings.Join(args, " "), err, out)
	}
	return nil
}

// probe dials the path until a reply (the path is programmed) and returns
// the peer address the backend saw.
func probe(ctx context.Context, client *corev1.Pod, to string) (string, error) {
	out, _, err := suite.cluster.Exec(ctx, client.Namespace, client.Name, workload.ClientContainer,
		"/perf-client", "dial-every", "-to="+to, "-interval=100ms", "-timeout=1s", "-within=30s", "-until-reply")
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", to, err)
	}
	var rs []echo.Timed
	for line := range strings.Lines(out) {
		var r echo.Timed
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return "", fmt.Errorf("probe %s: %w in %q", to, err, line)
		}
		rs = append(rs, r)
		if r.OK && r.Reply != nil {
			if r.Reply.Pod != podA {
				return "", fmt.Errorf("probe %s: reply from %s, want %s", to, r.Reply.Pod, podA)
			}
			return r.Reply.Peer, nil
		}
	}
	return "", fmt.Errorf("probe %s: no reply within 30 s: %s", to, summarize(rs))
}

// podIPOf is a backend's address.
func podIPOf(ctx context.Context, name string) (string, error) {
	ips, err := waitServing(ctx, suite.cluster, name)
	if err != nil {
		return "", err
	}
	return ips[0], nil
}

// profileFor is how long the CPU profile runs: within the open loop's 20 s.
const profileFor = 15 * time.Second

// pprofOn: the data-plane run deploys the built-in proxy with -pprof (its
// admin is loopback on the node) and profiles path (d).
func pprofOn() bool { return cfg.data && cfg.Proxy == manifests.ProxyBuiltin }

// proxyArgs are the built-in proxy's extra arguments for this run.
func proxyArgs() []string {
	if pprofOn() {
		return []string{"-pprof"}
	}
	return nil
}

func profileFile(key string) string { return "dataplane-" + key + ".cpu.pprof" }

// profile takes the node proxy's CPU profile on node (its loopback admin)
// into the artifacts, and, where the go tool is on PATH, its top entries.
func profile(ctx context.Context, node, key string) error {
	time.Sleep(time.Second) // into the open loop
	b, err := suite.cluster.NodeGet(ctx, node, contract.ProxyAdminPort, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(profileFor/time.Second)))
	if err != nil {
		return fmt.Errorf("node proxy profile: %w", err)
	}
	path := filepath.Join(cfg.Artifacts, profileFile(key))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		progress("profile: %s (no go tool on PATH for its top entries)", path)
		return nil
	}
	top, err := exec.CommandContext(ctx, goTool, "tool", "pprof", "-top", "-nodecount=30", path).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof -top %s: %w", path, err)
	}
	progress("profile: %s", path)
	return os.WriteFile(path+".top.txt", top, 0o644)
}
