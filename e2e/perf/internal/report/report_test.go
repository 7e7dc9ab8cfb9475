package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(string(html), "<polyline"); n != 11 {
		t.Errorf("report.html: %d distributions drawn, want 11 (ready, gone from the event and from the flip, new Service × 2 paths, kube-proxy with its stalls)", n)
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
	for name, v := range map[string]any{result.EndpointChangeFile: ec, result.NewServiceFile: ns, result.ScaleFile(5000): sc} {
		if err := result.Write(dir, name, v); err != nil {
			t.Fatal(err)
		}
	}
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
	if strings.Count(string(md), "not measured") != 10 {
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
