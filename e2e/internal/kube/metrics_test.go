package kube

import (
	"math"
	"testing"
)

const scrape = `# HELP svclb_svc_refused_total Refused connections.
# TYPE svclb_svc_refused_total counter
svclb_svc_refused_total{namespace="e2e",reason="no-endpoints",service="noep"} 3
svclb_svc_refused_total{namespace="e2e",reason="port-not-declared",service="pnd"} 2
svclb_svc_refused_total{namespace="",reason="no-service",service=""} 5
# HELP lat Latency.
# TYPE lat histogram
lat_bucket{le="0.01"} 1
lat_bucket{le="0.1"} 8
lat_bucket{le="1"} 10
lat_bucket{le="+Inf"} 10
lat_sum 1.5
lat_count 10
`

func TestMetrics(t *testing.T) {
	m, err := ParseMetrics([]byte(scrape))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"reason": "no-endpoints", "namespace": "e2e", "service": "noep"}, 3},
		{map[string]string{"reason": "no-endpoints", "service": "pnd"}, 0},
		{map[string]string{"reason": "no-service", "namespace": "", "service": ""}, 5},
		{map[string]string{"namespace": "e2e"}, 5},
		{nil, 10},
	} {
		if got := m.Sum("svclb_svc_refused_total", c.labels); got != c.want {
			t.Errorf("Sum(%v) = %g, want %g", c.labels, got, c.want)
		}
	}
	if got := m.Sum("absent_total", nil); got != 0 {
		t.Errorf("absent family = %g", got)
	}
	h := m.Histogram("lat", nil)
	if h.Count != 10 || h.Quantile(0.5) != 0.1 || h.Quantile(0.99) != 1 || h.Quantile(0.05) != 0.01 {
		t.Fatalf("histogram %+v p50 %g p99 %g", h, h.Quantile(0.5), h.Quantile(0.99))
	}
	before := Histogram{Count: 8, Buckets: []Bucket{{0.01, 1}, {0.1, 8}, {1, 8}, {math.Inf(1), 8}}}
	d := h.Sub(before)
	if d.Count != 2 || d.Quantile(0.5) != 1 {
		t.Fatalf("delta %+v p50 %g", d, d.Quantile(0.5))
	}
	if (Histogram{}).Quantile(0.5) != 0 {
		t.Fatal("no observations must give 0")
	}
	if _, err := ParseMetrics([]byte("bad metric{")); err == nil {
		t.Fatal("garbage must not parse")
	}
}

func TestHTTPBody(t *testing.T) {
	b, err := httpBody("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\na: 1\nb: 2\n", "x")
	if err != nil || string(b) != "a: 1\nb: 2\n" {
		t.Fatalf("200: %q, %v", b, err)
	}
	if _, err := httpBody("HTTP/1.0 503 Service Unavailable\r\n\r\nPRE_INITIALIZING\n", "x"); err == nil {
		t.Fatal("a 503 must be an error")
	}
	if _, err := httpBody("bash: connect: Connection refused", "x"); err == nil {
		t.Fatal("no HTTP response must be an error")
	}
}
