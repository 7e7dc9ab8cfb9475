package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
	"github.com/aether-mesh/svclb/internal/testing/golden"
)

const miB = 1 << 20

func envtestRun(broke string) scaleresult.RunInfo {
	return scaleresult.RunInfo{Started: time.Date(2026, 12, 3, 9, 1, 0, 0, time.UTC), Duration: 3*time.Minute + 12*time.Second,
		LoadBefore: [3]float64{2, 5.68, 4.35}, LoadAfter: [3]float64{5.81, 6.2, 5.42}, CPUs: 2, Notes: []string{"a <note>"}, Broke: broke}
}

func sampleGrowth() *scaleresult.Growth {
	cost := func(rss, hwm uint64, cpu float64) scaleresult.ProcCost {
		return scaleresult.ProcCost{Memory: scaleresult.Memory{RSS: rss, HWM: hwm}, CPUSeconds: cpu}
	}
	return &scaleresult.Growth{RunInfo: envtestRun(""), EndpointsPer: 10, Workers: 8, Poll: 250 * time.Millisecond, KubeProxyPoll: 2 * time.Second,
		Steps: []scaleresult.GrowthStep{
			{Services: 1000, Created: 5 * time.Second, Push: 250 * time.Millisecond, KubeProxy: 2300 * time.Millisecond, Pushes: 10, PushSeconds: 0.141,
				Agent: cost(80*miB, 82*miB, 1.5), NodeProxy: cost(45*miB, 46*miB, 0.75), KubeProxyCost: cost(90*miB, 120*miB, 6),
				AgentHeapInuse: 28 * miB, LoadAfter: [3]float64{3.44, 4, 4}, NodeProxyHeap: "growth-1000-nodeproxy.heap.pb.gz"},
			// kube-proxy not programmed within the bound: no time, no ratio to its CPU
			{Services: 10000, Created: 91 * time.Second, Push: 1004 * time.Millisecond, Pushes: 203, PushSeconds: 4.333,
				Agent: cost(326*miB, 330*miB, 9), NodeProxy: cost(231*miB, 240*miB, 5), AgentHeapInuse: 268 * miB, LoadAfter: [3]float64{5.81, 6, 5}},
		}}
}

func sampleHeld() *scaleresult.Held {
	p := func(p50, p99, p999, max time.Duration) scaleresult.Percentiles {
		return scaleresult.Percentiles{N: 2000, P50: p50, P99: p99, P999: p999, Max: max}
	}
	us := time.Microsecond
	return &scaleresult.Held{RunInfo: envtestRun(""), Endpoints: 4, Rate: 100, Conns: 2000, Timeout: 5 * time.Second,
		Levels: []scaleresult.HeldLevel{
			{Held: 0, Latency: p(1430*us, 5840*us, 33200*us, 40*time.Millisecond), Lag: 8 * time.Millisecond, Direct: p(900*us, 3540*us, 32400*us, 0),
				NodeProxy: scaleresult.Memory{RSS: 24*miB + miB/2}, NodeProxyFDs: 21, CPUSeconds: 1, LoadAfter: [3]float64{4.13, 4, 4}},
			{Held: 1000, Active: 1000, Latency: p(1430*us, 3670*us, 9080*us, 226*time.Millisecond), Errors: 2, ErrorSamples: []string{"dial: i/o <timeout>"},
				Direct: p(640*us, 2070*us, 5080*us, 0), NodeProxy: scaleresult.Memory{RSS: 39 * miB}, NodeProxyFDs: 6013, CPUSeconds: 1.2,
				LoadAfter: [3]float64{2.72, 3, 3}},
		}}
}

func sampleOnDemand() *scaleresult.OnDemand {
	us := time.Microsecond
	return &scaleresult.OnDemand{RunInfo: envtestRun("level 5000: no echo within 3m"), Services: 5100, Endpoints: 4, Conns: 100, Rate: 4,
		Timeout: 5 * time.Second, Levels: []scaleresult.OnDemandLevel{
			{Demanded: 10, Ready: 3100 * time.Millisecond, First: scaleresult.Percentiles{N: 100, P50: 4190 * us, P99: 15200 * us, Max: 16 * time.Millisecond},
				Known: scaleresult.Percentiles{N: 100, P50: 1900 * us, P99: 3620 * us}, Attempts: 100, Pushes: 100, PushSeconds: 0.03,
				Agent: scaleresult.Memory{RSS: 90 * miB}, NodeProxy: scaleresult.Memory{RSS: 27*miB + miB/2}, DemandedAfter: 110,
				LoadAfter: [3]float64{3.58, 3, 2}, NodeProxyCPUProfile: "ondemand-10-nodeproxy.cpu.pb.gz"},
			{Demanded: 5000, First: scaleresult.Percentiles{N: 99}, FirstErrors: 1, ErrorSamples: []string{"10.96.0.12:80: i/o timeout"}}, // no demanded sample
		}}
}

// writeEnvtest writes the three envtest results into dir, as the scale tests write them.
func writeEnvtest(t *testing.T, dir string) {
	t.Helper()
	for _, w := range []interface{ Write(string) error }{sampleGrowth(), sampleHeld(), sampleOnDemand()} {
		if err := w.Write(dir); err != nil {
			t.Fatal(err)
		}
	}
}

func renderMD(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRenderEnvtestGolden: the envtest scale results' sections in both reports, byte for
// byte, beside the perf suite's results.
func TestRenderEnvtestGolden(t *testing.T) {
	dir := t.TempDir()
	writeEnvtest(t, dir)
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.md", "report.html"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "envtest-"+name+".golden"), b)
	}
}

// TestRenderEnvtest: the rows as docs/perf.md gives them, with no ratio where kube-proxy or
// the demanded connections have no figure, and labels escaped in the HTML.
func TestRenderEnvtest(t *testing.T) {
	dir := t.TempDir()
	writeEnvtest(t, dir)
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	md := renderMD(t, dir)
	for _, want := range []string{
		"| 1,000 | 5s | 250ms | 10 (0.141) | 80.0 | 28.0 | 45.0 | 90.0 | 0.889 | 1.389 | 2.3s | 3.44 |",
		"| 10,000 | 1m31s | 1s | 203 (4.333) | 326.0 | 268.0 | 231.0 | 0.0 | – | – | – | 5.81 |",
		"| 1,000 | 1.50 | 0.75 | 6.00 | 0.250 | 0.375 | 82.0 | 46.0 | 120.0 |",
		"| 0 | 1.43 | 5.84 | 33.2 | 0.90 / 3.54 / 32.4 | 24.5 MiB | 21 | 1.000 | 40.0 | 0 | 2,000 (0) | 8.00 | 0.500 | 4.13 |",
		"| 1,000 | 1.43 | 3.67 | 9.08 | 0.64 / 2.07 / 5.08 | 39.0 MiB | 6,013 | 0.628 | 226 | 1,000 | 2,002 (2) | 0.00 | 0.599 | 2.72 |",
		"| 10 | 4.19 | 15.2 | 1.90 | 3.62 | 2.205 | 100 (0.3 ms) | 90.0 MiB | 27.5 MiB | 3.1s | 16.0 | 0 | 0 | 100 | 3.58 |",
		"| 5,000 | 0.00 | 0.00 | 0.00 | 0.00 | – | 0 | 0.0 MiB | 0.0 MiB | 0s | 0.00 | 1 | 0 | 0 | 0.00 |",
		"- Stopped: level 5000: no echo within 3m",
		"- 1,000 held: 2 connections failed, 0 direct ones; dial: i/o <timeout>",
		"growth-1000-nodeproxy.heap.pb.gz",
		"load average 2.00, 5.68, 4.35 before, 5.81, 6.20, 5.42 after, on 2 cores",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "dial: i/o &lt;timeout&gt;") || strings.Contains(string(html), "<timeout>") {
		t.Error("report.html: an error sample is not escaped")
	}
}

// TestRenderEnvtestNotRun: with none of the files, each section names the target that makes it.
func TestRenderEnvtestNotRun(t *testing.T) {
	dir := t.TempDir()
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	md := renderMD(t, dir)
	for _, want := range []string{"## " + growthTitle + "\n\nnot run (make scale-growth)\n", "## " + heldTitle + "\n\nnot run (make scale-held)\n",
		"## " + onDemandTitle + "\n\nnot run (make scale-ondemand)\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

// TestRenderEnvtestCorrupt: a file that is not JSON and one too large are each an error
// naming the file, said in its section; the other results, the perf suite's included, are
// still rendered.
func TestRenderEnvtestCorrupt(t *testing.T) {
	dir := t.TempDir()
	writeEnvtest(t, dir)
	if err := result.Write(dir, result.NewServiceFile, &result.NewService{FromSlice: result.NewPair(sample(), sample(), nil)}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, scaleresult.GrowthFile), []byte(`{"steps": [{"services": 1000,`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, scaleresult.HeldFile), []byte(strings.Repeat(" ", scaleresult.MaxFileBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Render(dir)
	if err == nil || !strings.Contains(err.Error(), "growth.json: unexpected EOF") || !strings.Contains(err.Error(), "held.json: larger than 4 MiB") {
		t.Fatalf("Render: %v, want an error naming growth.json and held.json", err)
	}
	t.Log(err)
	md := renderMD(t, dir)
	for _, want := range []string{
		"## " + growthTitle + "\n\ncould not be read: growth.json: unexpected EOF\n",
		"## " + heldTitle + "\n\ncould not be read: held.json: larger than 4 MiB: not a scale result\n",
		"| 10 | 4.19 | 15.2 |",
		"## New Service → first success",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}
