package result

import (
	"testing"
	"time"
)

func TestNewDist(t *testing.T) {
	var s []float64
	for i := 100; i >= 1; i-- {
		s = append(s, float64(i))
	}
	d := NewDist(s)
	if d.N != 100 || d.P50 != 50 || d.P90 != 90 || d.P99 != 99 || d.Min != 1 || d.Max != 100 || d.Samples[0] != 1 {
		t.Fatalf("NewDist(1..100) = n %d p50 %g p90 %g p99 %g min %g max %g", d.N, d.P50, d.P90, d.P99, d.Min, d.Max)
	}
	if s[0] != 100 {
		t.Error("NewDist sorted its argument")
	}
	if d := NewDist([]float64{3, 1, 2}); d.P50 != 2 || d.P99 != 3 {
		t.Errorf("NewDist(3,1,2) p50 %g p99 %g", d.P50, d.P99)
	}
	if d := NewDist(nil); d.N != 0 || d.P50 != 0 {
		t.Errorf("NewDist(nil) = %+v", d)
	}
	p := Pair{Agent: NewDist([]float64{10, 20}), KubeProxy: NewDist([]float64{100, 400})}
	if r := p.Ratios(time.Millisecond); r[0].V != 0.1 || r[2].V != 0.05 || r[0].AtMost || r[2].AtMost {
		t.Errorf("ratios p50 %v p99 %v", r[0], r[2])
	}
}

// TestRatiosAtResolution: an agent quantile at or below the resolution, a
// negative one included, gives a bound (resolution / kube-proxy's), never a
// negative ratio; kube-proxy's without a positive quantile gives none.
func TestRatiosAtResolution(t *testing.T) {
	p := Pair{Agent: NewDist([]float64{-7, -7, 63}), KubeProxy: NewDist([]float64{500, 500, 700})}
	r := p.Ratios(10 * time.Millisecond)
	if !r[0].AtMost || r[0].V != 0.02 || r[0].String() != "≤ 0.020" {
		t.Errorf("p50 of -7 ms against 500 ms at 10 ms resolution: %+v (%s), want ≤ 0.020", r[0], r[0])
	}
	if r[2].AtMost || r[2].V != 0.09 || r[2].String() != "0.090" {
		t.Errorf("p99 of 63 ms against 700 ms: %+v (%s), want 0.090", r[2], r[2])
	}
	if got := (Pair{Agent: NewDist([]float64{5})}).Ratios(10 * time.Millisecond)[0]; got.String() != "–" {
		t.Errorf("no kube-proxy samples: %s, want –", got)
	}
}

func TestParseLoad(t *testing.T) {
	l, err := parseLoad("8.98 11.45 11.22 3/812 4242\n", 2, time.Date(2026, 11, 30, 19, 50, 6, 0, time.UTC))
	if err != nil || l.Load1 != 8.98 || l.Load15 != 11.22 {
		t.Fatalf("parseLoad = %+v, %v", l, err)
	}
	if got := l.String(); got != "load average 8.98, 11.45, 11.22 on 2 cores at 19:50:06" {
		t.Errorf("String = %q", got)
	}
	if _, err := parseLoad("x", 2, time.Now()); err == nil {
		t.Error("parseLoad(x): no error")
	}
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	ec := &EndpointChange{Services: 0, Ready: Pair{Agent: NewDist([]float64{1})}}
	if err := Write(dir, EndpointChangeFile, ec); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{5000, 1000} {
		if err := Write(dir, ScaleFile(n), &Scale{Services: n}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.EndpointChange == nil || r.EndpointChange.Ready.Agent.N != 1 || r.NewService != nil || len(r.Scale) != 2 || r.Scale[0].Services != 1000 {
		t.Fatalf("Read = %+v", r)
	}
}

func TestNewPair(t *testing.T) {
	p := NewPair([]float64{10, 20, 30}, []float64{800, 31000, 900}, []bool{false, true})
	if p.Agent.N != 3 || p.KubeProxy.N != 2 || p.KubeProxy.Max != 900 || p.KubeProxyAll.N != 3 || p.KubeProxyAll.Max != 31000 {
		t.Fatalf("NewPair = agent %d, kube-proxy %d (max %g), all %d (max %g)", p.Agent.N, p.KubeProxy.N, p.KubeProxy.Max, p.KubeProxyAll.N, p.KubeProxyAll.Max)
	}
}
