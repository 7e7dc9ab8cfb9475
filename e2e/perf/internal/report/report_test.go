package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/perf/internal/connload"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/internal/testing/golden"
)

func sample() []float64 { return []float64{12, 25, 18, 40, 9} }

// TestRender: results written as the suite writes them come out as both
// reports, with the goals judged from the ratios and a chart per
// distribution; labels are escaped in the HTML.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir)
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// gone: 18/100; from the flip, ready's agent p50 (8 ms) is below the resolution: a bound
		"| endpoint change p50 | ≤ 0.1 | ready 0.018, gone 0.180; from the gate flip: ready ≤ 0.010, gone 0.018 | missed |",
		"| endpoint change p99 | ≤ 0.25 | ready 0.027, gone 0.400; from the gate flip: ready 0.033, gone 0.027 | missed |",
		"| new Service p50 | ≤ 0.2 | from the slice event 0.018; from Create – | met |",
		"| ready | agent / kube-proxy |  | ≤ 0.010 | 0.033 | 0.033 |  |  |",
		"| CPU-seconds to program 5000 Services | ≤ 0.5 | while created 0.200 | met |",
		"| RSS at 5000 Services | ≤ 1.0 | VmRSS 0.800 | met |",
		"| ready | agent | 5 | 18 ms | 40 ms | 40 ms | 9 ms | 40 ms |",
		"load average 9.50, 0.00, 0.00 on 2 cores",
		"- a <note>",
		"| slice event | kube-proxy, with the 1 its failed syncs stalled | 6 | 1000 ms | 31000 ms | 31000 ms | 800 ms | 31000 ms |",
		// (d) 1.2 ms against (c) 1.5 ms at p50, 6 against 5 at p99: 20 % over the goal
		"| setup to first byte, (d)/(c) | ≤ 1.0 | p50 0.800, p99 1.200; missed: p99 by 20 % | missed |",
		"| setup to first byte, (d)/(b) | ≤ 1.3 | p50 1.500; missed: p50 by 15 % | missed |",
		"| bulk throughput, (d)/(a) | ≥ 0.9 | 1 stream 0.900, 8 streams 0.450; missed: 8 streams by 50 % | missed |",
		"| new connections per second, (d)/(b) | ≥ 0.5 | conns/s 0.600 | met |",
		"| (d) meshed, Phase 1 on | 10000 | 0 | 1.20 | 6.00 | 9.00 | 12.0 | 0.50 | 3.000 | 3.000 | 0.800 | 1.200 |",
		"| (d) meshed, Phase 1 on | 480 | 0.480 | 1.200 | 900 | 0.900 | 1.500 | 360 | 0.450 | 1.200 |",
		"| (d) meshed, Phase 1 on | 10.0.0.2:4000 | 0.200 | 4.000 | timeout 2 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(string(html), "<polyline"); n != 15 {
		t.Errorf("report.html: %d distributions drawn, want 15 (ready, gone from the event and from the flip, new Service × 2 paths, kube-proxy with its stalls; 4 data-plane paths)", n)
	}
	if !strings.Contains(string(html), "a &lt;note&gt;") || strings.Contains(string(html), "a <note>") {
		t.Error("report.html: a note is not escaped")
	}
}

// writeResults writes one result of each measurement into dir, as the suite writes them.
func writeResults(t *testing.T, dir string) {
	t.Helper()
	h := result.Header{Started: time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC), Duration: time.Minute, Proxy: "builtin",
		LoadBefore: result.Load{At: time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC), Load1: 9.5, CPUs: 2}, Notes: []string{"a <note>"}}
	kp := []float64{900, 1100, 1000, 1500, 800}
	ec := &result.EndpointChange{Header: h, Interval: 10 * time.Millisecond,
		Ready:         result.Pair{Agent: result.NewDist(sample()), KubeProxy: result.NewDist(kp)},
		Gone:          result.Pair{Agent: result.NewDist(sample()), KubeProxy: result.NewDist([]float64{100, 100, 100, 100, 100})},
		ReadyFromFlip: result.Pair{Agent: result.NewDist([]float64{-7, -3, 8, 30, 50}), KubeProxy: result.NewDist(kp)},
		GoneFromFlip:  result.Pair{Agent: result.NewDist(sample()), KubeProxy: result.NewDist(kp)}}
	ns := &result.NewService{Header: h, FromSlice: result.NewPair(sample(), append(kp, 31000), []bool{5: true})}
	sc := &result.Scale{Header: h, Services: 5000, EndpointsPer: 3, Nodes: []result.NodeScale{{Node: "w1",
		Agent:     result.Side{Programmed: time.Minute, CPUSeconds: 2, RSS: 80 << 20},
		KubeProxy: result.Side{Programmed: 2 * time.Minute, CPUSeconds: 10, RSS: 100 << 20}}}}
	for name, v := range map[string]any{result.EndpointChangeFile: ec, result.NewServiceFile: ns, result.ScaleFile(5000): sc, result.DataplaneFile: dataplane(h)} {
		if err := result.Write(dir, name, v); err != nil {
			t.Fatal(err)
		}
	}
}

// dataplane is four paths; (d) misses the p99 and 8-stream goals.
func dataplane(h result.Header) *result.Dataplane {
	path := func(key, name string, p50, p99, conns, mib1, mib8 float64) result.DataPath {
		curve := []connload.Point{{Q: 0, Ms: p50 / 2}, {Q: 0.5, Ms: p50}, {Q: 0.99, Ms: p99}, {Q: 0.999, Ms: 1.5 * p99}, {Q: 1, Ms: 2 * p99}}
		return result.DataPath{Key: key, Name: name, Client: "perf-plain", To: "10.96.0.10:80", Peer: "10.244.1.5:4000",
			Open:   connload.OpenResult{Rate: 500, Latency: connload.Latency{N: 10000, P50: p50, P99: p99, P999: 1.5 * p99, Max: 2 * p99, Curve: curve}, MaxLag: 0.5},
			Closed: connload.ClosedResult{Concurrency: 8, For: 5, Max: 10000, Conns: int(conns * 5), Seconds: 5, PerSecond: conns},
			Bulk1:  connload.BulkResult{Streams: 1, Bytes: 1 << 30, Seconds: 5, MiBps: mib1},
			Bulk8:  connload.BulkResult{Streams: 8, Bytes: 1 << 30, Seconds: 5, MiBps: mib8}}
	}
	d := &result.Dataplane{Header: h, Node: "w1", CPUSource: "the <node proxy> container's cgroup cpu.stat usage_usec",
		Paths: []result.DataPath{
			path("a", "wire", 0.4, 2, 1000, 1000, 800),
			path("b", "kube-proxy", 0.8, 3, 800, 900, 700),
			path("c", "meshed, Phase 1 off", 1.5, 5, 400, 600, 300),
			path("d", "meshed, Phase 1 on", 1.2, 6, 480, 900, 360),
		}}
	d.Paths[3].Peer, d.Paths[3].ProxyCPUOpen, d.Paths[3].ProxyCPUBulk = "10.0.0.2:4000", 2, 8
	d.Paths[3].Open.Errors = map[string]int{"timeout": 2}
	// (d) read every counter, (c) one only (a kernel without the others): "–" for the rest.
	d.Paths[3].OpenTCP = map[string]int64{"TcpExt.ListenOverflows": 12, "TcpExt.ListenDrops": 12, "TcpExt.TCPSynRetrans": 30,
		"Tcp.RetransSegs": 41, "TcpExt.TCPTimeouts": 9, "Tcp.AttemptFails": 2}
	d.Paths[2].OpenTCP = map[string]int64{"Tcp.RetransSegs": 3}
	d.Paths[3].OpenNodeBusy, d.Paths[3].OpenNodeSteal = 0.93, 0.06
	return d
}

// TestRenderGolden: both reports of writeResults' results, byte for byte (times in UTC).
func TestRenderGolden(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.UTC
	dir := t.TempDir()
	writeResults(t, dir)
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	golden.CheckFiles(t, dir, "report.md", "report.html")
}

// TestRenderNothing: an empty directory renders goals "not measured".
func TestRenderNothing(t *testing.T) {
	dir := t.TempDir()
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if strings.Count(string(md), "not measured") != 18 {
		t.Errorf("report.md of nothing:\n%s", md)
	}
}

func TestMsLabel(t *testing.T) {
	for v, want := range map[float64]string{0.5: "0.5ms", 12.4: "12ms", 1000: "1s", 1540: "1.5s", -20: "-20ms"} {
		if got := msLabel(v); got != want {
			t.Errorf("msLabel(%g) = %q, want %q", v, got, want)
		}
	}
}

// TestRenderStoppedSize: a size that stopped before anything was programmed
// says so in the goals and in its section, with no table of zeros.
func TestRenderStoppedSize(t *testing.T) {
	dir := t.TempDir()
	sc := &result.Scale{Services: 5000, EndpointsPer: 3, Broke: "creating: 2729 of 5000 Services done",
		Nodes: []result.NodeScale{{Node: "w1"}, {Node: "w2"}}}
	if err := result.Write(dir, result.ScaleFile(5000), sc); err != nil {
		t.Fatal(err)
	}
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| CPU-seconds to program 5000 Services | ≤ 0.5 | not measured: the 5000-Service run stopped before both had programmed (its section says where) | not measured |",
		"not all created (below: where it stopped)",
		"- Stopped: creating: 2729 of 5000 Services done",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "0.0 MiB") || strings.Contains(string(md), "| w1 |") {
		t.Errorf("report.md has a row for a node nothing was measured on:\n%s", md)
	}
}
