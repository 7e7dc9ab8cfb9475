package scale

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseLevels(t *testing.T) {
	got, err := ParseLevels("0, 100,1000")
	if err != nil || !reflect.DeepEqual(got, []int{0, 100, 1000}) {
		t.Fatalf("ParseLevels = %v, %v", got, err)
	}
	if got, err := ParseLevels("50"); err != nil || !reflect.DeepEqual(got, []int{50}) {
		t.Fatalf("ParseLevels(50) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0,", "0,x", "-1", "100,0", "0,0"} {
		if _, err := ParseLevels(bad); err == nil {
			t.Errorf("ParseLevels(%q): no error", bad)
		}
	}
}

func TestSummarize(t *testing.T) {
	if p := Summarize(nil); p != (Percentiles{}) {
		t.Errorf("Summarize(nil) = %+v", p)
	}
	// 1…2000 ms, shuffled: nearest rank gives sample ⌈q·n⌉.
	var d []time.Duration
	for i := range 2000 {
		d = append(d, time.Duration((i*7919)%2000+1)*time.Millisecond)
	}
	first := d[0]
	want := Percentiles{N: 2000, P50: 1000 * time.Millisecond, P99: 1980 * time.Millisecond, P999: 1998 * time.Millisecond, Max: 2000 * time.Millisecond}
	if p := Summarize(d); p != want {
		t.Errorf("Summarize(1…2000 ms) = %+v, want %+v", p, want)
	}
	if d[0] != first {
		t.Error("Summarize sorted its argument")
	}
	// 100 samples: p99 is the 99th (not the 100th through rounding), p99.9 the largest.
	var h []time.Duration
	for i := range 100 {
		h = append(h, time.Duration(i+1))
	}
	if p := Summarize(h); p.P50 != 50 || p.P99 != 99 || p.P999 != 100 || p.Max != 100 {
		t.Errorf("Summarize(1…100) = %+v", p)
	}
	if p := Summarize([]time.Duration{7}); p != (Percentiles{N: 1, P50: 7, P99: 7, P999: 7, Max: 7}) {
		t.Errorf("Summarize(one) = %+v", p)
	}
}

func TestOpenLoop(t *testing.T) {
	var calls atomic.Int64
	boom := errors.New("boom")
	lat, errs, _, err := OpenLoop(context.Background(), 30, 1000, func(context.Context) (time.Time, error) {
		if calls.Add(1)%10 == 0 {
			return time.Time{}, boom
		}
		return time.Now(), nil
	})
	if err != nil || calls.Load() != 30 || len(lat) != 27 || len(errs) != 3 || !errors.Is(errs[0], boom) {
		t.Fatalf("OpenLoop: %d calls, %d latencies, errors %v, %v", calls.Load(), len(lat), errs, err)
	}
	for _, l := range lat {
		if l < 0 {
			t.Errorf("latency %s before the connection was due", l)
		}
	}
	for _, bad := range [][2]float64{{0, 10}, {5, 0}, {5, -1}} {
		if _, _, _, err := OpenLoop(context.Background(), int(bad[0]), bad[1], nil); err == nil {
			t.Errorf("OpenLoop(%v): no error", bad)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := OpenLoop(ctx, 5, 0.001, func(context.Context) (time.Time, error) { return time.Now(), nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenLoop, cancelled: %v", err)
	}
}

func TestCountFDs(t *testing.T) {
	n, err := CountFDs(os.Getpid())
	if err != nil || n < 3 {
		t.Fatalf("CountFDs(self) = %d, %v", n, err)
	}
	if _, err := CountFDs(-1); err == nil {
		t.Error("CountFDs(-1): no error")
	}
}

func sampleHeld() *Held {
	const mib = 1 << 20
	return &Held{RunInfo: RunInfo{Started: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), CPUs: 2}, Endpoints: 4, Rate: 100, Conns: 2000, Timeout: heldTimeout,
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

func TestHeldWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "perf")
	h := sampleHeld()
	if err := h.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, HeldFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Held
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, h) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, *h)
	}
	if !strings.Contains(string(b), `"p999": 4000000`) || !strings.Contains(string(b), `"nodeProxyFDs": 6019`) {
		t.Errorf("field names:\n%s", b)
	}
}
