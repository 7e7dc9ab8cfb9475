package scaleresult

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleHeld() *Held {
	const mib = 1 << 20
	return &Held{RunInfo: RunInfo{Started: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), CPUs: 2}, Endpoints: 4, Rate: 100, Conns: 2000, Timeout: 5 * time.Second,
		Levels: []HeldLevel{
			{Held: 0, Latency: Percentiles{N: 2000, P50: time.Millisecond, P99: 2 * time.Millisecond, P999: 4 * time.Millisecond, Max: 5 * time.Millisecond},
				Lag: time.Millisecond, Direct: Percentiles{N: 2000, P50: time.Millisecond / 2, P99: time.Millisecond, P999: 3 * time.Millisecond},
				NodeProxy: Memory{RSS: 24 * mib}, NodeProxyFDs: 19, CPUSeconds: 1.2, LoadAfter: [3]float64{2.5, 3, 4}},
			{Held: 1000, Active: 1000, Latency: Percentiles{N: 1998, P50: time.Millisecond, P99: 3 * time.Millisecond, P999: 10 * time.Millisecond,
				Max: 20 * time.Millisecond}, Errors: 2, ErrorSamples: []string{"dial: timeout"}, NodeProxy: Memory{RSS: 40 * mib}, NodeProxyFDs: 6019},
		}}
}

func TestHeldTable(t *testing.T) {
	lines := strings.Split(strings.TrimRight(sampleHeld().Table(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "held") {
		t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
	}
	want := [][]string{
		{"0", "0", "2000", "0", "1.000", "2.000", "4.000", "5.000", "1.000", "1.00", "1.00", "0.500", "1.000", "3.000", "24.0", "19", "0.600", "2.50"},
		{"1000", "1000", "2000", "2", "1.000", "3.000", "10.000", "20.000", "0.000", "1.50", "2.50", "0.000", "0.000", "0.000", "40.0", "6019", "0.000", "0.00"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i+1]); !reflect.DeepEqual(got, w) {
			t.Errorf("row %d = %q, want %q", i+1, got, w)
		}
	}
	// A first level with no latency: no ratio rather than a division by zero.
	h := sampleHeld()
	h.Levels[0].Latency, h.Levels[0].Errors = Percentiles{}, 0
	if got := strings.Fields(strings.Split(h.Table(), "\n")[1]); got[9] != "–" || got[10] != "–" || got[16] != "–" {
		t.Errorf("row without samples = %q", got)
	}
}
