package scale

import (
	"testing"
)

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
