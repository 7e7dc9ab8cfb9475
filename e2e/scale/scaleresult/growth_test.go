package scaleresult

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleGrowth() *Growth {
	const mib = 1 << 20
	return &Growth{RunInfo: RunInfo{Started: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), CPUs: 2}, EndpointsPer: 10, Workers: 8, Poll: 250 * time.Millisecond,
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
