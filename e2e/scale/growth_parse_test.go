package scale

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSteps(t *testing.T) {
	got, err := ParseSteps("1000, 2000,5000")
	if err != nil || !reflect.DeepEqual(got, []int{1000, 2000, 5000}) {
		t.Fatalf("ParseSteps = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1000,", "1000,abc", "0", "-5", "2000,1000", "1000,1000"} {
		if _, err := ParseSteps(bad); err == nil {
			t.Errorf("ParseSteps(%q): no error", bad)
		}
	}
}

func TestParsePushes(t *testing.T) {
	body := `# HELP svclb_push_duration_seconds From the start of a rebuild to the change handed to the xDS server.
# TYPE svclb_push_duration_seconds histogram
svclb_push_duration_seconds_bucket{le="0.0005"} 0
svclb_push_duration_seconds_bucket{le="+Inf"} 7
svclb_push_duration_seconds_sum 1.25
svclb_push_duration_seconds_count 7
# TYPE svclb_clusters gauge
svclb_clusters 12
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 4.194304e+07
`
	p, err := ParsePushes([]byte(body))
	if err != nil || p != (Pushes{Count: 7, Seconds: 1.25}) {
		t.Fatalf("ParsePushes = %+v, %v", p, err)
	}
	if d := p.Sub(Pushes{Count: 2, Seconds: 0.25}); d != (Pushes{Count: 5, Seconds: 1}) {
		t.Errorf("Sub = %+v", d)
	}
	if _, err := ParsePushes([]byte("# TYPE svclb_clusters gauge\nsvclb_clusters 12\n")); err == nil {
		t.Error("no error without the histogram")
	}
	if _, err := ParsePushes([]byte("# TYPE svclb_push_duration_seconds gauge\nsvclb_push_duration_seconds 1\n")); err == nil {
		t.Error("no error for a gauge")
	}
	if _, err := ParsePushes([]byte("not { metrics")); err == nil {
		t.Error("no error for a body that does not parse")
	}
	if h, err := ParseHeapInuse([]byte(body)); err != nil || h != 40<<20 {
		t.Errorf("ParseHeapInuse = %d, %v", h, err)
	}
	if _, err := ParseHeapInuse([]byte("# TYPE svclb_clusters gauge\nsvclb_clusters 12\n")); err == nil {
		t.Error("no error without the heap gauge")
	}
}

func TestParseLoadavg(t *testing.T) {
	l, err := parseLoadavg("5.98 3.98 1.72 3/512 4242\n")
	if err != nil || l != [3]float64{5.98, 3.98, 1.72} {
		t.Fatalf("parseLoadavg = %v, %v", l, err)
	}
	for _, bad := range []string{"", "1.0 2.0", "1.0 x 3.0"} {
		if _, err := parseLoadavg(bad); err == nil {
			t.Errorf("parseLoadavg(%q): no error", bad)
		}
	}
}

func sampleGrowth() *Growth {
	const mib = 1 << 20
	return &Growth{RunInfo: RunInfo{Started: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), CPUs: 2}, EndpointsPer: 10, Workers: 8, Poll: growthPoll,
		Steps: []GrowthStep{
			{Services: 1000, Created: 41 * time.Second, Push: 750 * time.Millisecond, KubeProxy: 4 * time.Second, Pushes: 12, PushSeconds: 0.4,
				Agent: ProcCost{Memory: Memory{RSS: 50 * mib}}, AgentHeapInuse: 20 * mib, NodeProxy: ProcCost{Memory: Memory{RSS: 30 * mib}},
				KubeProxyCost: ProcCost{Memory: Memory{RSS: 100 * mib}}, LoadAfter: [3]float64{6.5, 4, 2}},
			{Services: 2000, Push: 1250 * time.Millisecond, Agent: ProcCost{Memory: Memory{RSS: 60 * mib}}}, // kube-proxy unmeasured
		}}
}

func TestGrowthTable(t *testing.T) {
	lines := strings.Split(strings.TrimRight(sampleGrowth().Table(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.HasPrefix(strings.TrimSpace(lines[0]), "services") {
		t.Errorf("header %q", lines[0])
	}
	want := []string{"1000", "41s", "750ms", "12", "0.400", "50.0", "20.0", "30.0", "100.0", "0.500", "0.800", "4s", "6.50"}
	if got := strings.Fields(lines[1]); !reflect.DeepEqual(got, want) {
		t.Errorf("row 1 = %q, want %q", got, want)
	}
	// No kube-proxy figure: no ratio, no time, rather than a division by zero.
	if got := strings.Fields(lines[2]); got[9] != "–" || got[10] != "–" || got[11] != "–" {
		t.Errorf("row 2 = %q", got)
	}
}

func TestGrowthWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "perf")
	g := sampleGrowth()
	if err := g.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, GrowthFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Growth
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, g) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, *g)
	}
	if !strings.Contains(string(b), `"rss": 52428800`) || !strings.Contains(string(b), `"pushSeconds": 0.4`) {
		t.Errorf("field names:\n%s", b)
	}
}
