package scaleresult

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleOnDemand() *OnDemand {
	const mib = 1 << 20
	return &OnDemand{RunInfo: RunInfo{Started: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), CPUs: 2}, Services: 5100, Endpoints: 4, Conns: 100, Rate: 4,
		Timeout: 5 * time.Second, Levels: []OnDemandLevel{
			{Demanded: 10, Ready: 3100 * time.Millisecond, First: Percentiles{N: 100, P50: 4 * time.Millisecond, P99: 12 * time.Millisecond,
				Max: 14 * time.Millisecond}, Known: Percentiles{N: 100, P50: 2 * time.Millisecond, P99: 6 * time.Millisecond},
				Attempts: 100, Pushes: 50, PushSeconds: 0.5, Agent: Memory{RSS: 60 * mib}, NodeProxy: Memory{RSS: 25 * mib}, DemandedAfter: 110, LoadAfter: [3]float64{5.5, 5, 4}},
			{Demanded: 5000, First: Percentiles{N: 99}, FirstErrors: 1, ErrorSamples: []string{"i/o timeout"}}, // no known sample
		}}
}

func TestOnDemandTable(t *testing.T) {
	lines := strings.Split(strings.TrimRight(sampleOnDemand().Table(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "demanded") {
		t.Fatalf("table:\n%s", strings.Join(lines, "\n"))
	}
	want := []string{"10", "3.1s", "4.000", "12.000", "14.000", "0", "2.000", "6.000", "0", "2.00", "2.00", "100", "50", "10.0", "60.0", "25.0", "5.50"}
	if got := strings.Fields(lines[1]); !reflect.DeepEqual(got, want) {
		t.Errorf("row 1 = %q, want %q", got, want)
	}
	if got := strings.Fields(lines[2]); got[5] != "1" || got[9] != "–" || got[10] != "–" || got[13] != "–" {
		t.Errorf("row 2 = %q", got)
	}
}
