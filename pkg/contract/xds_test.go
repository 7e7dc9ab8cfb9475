package contract

import "testing"

func TestParseClusterName(t *testing.T) {
	for name, ok := range map[string]bool{
		"svc:10.96.0.10:53":          true,
		"svc:10.96.0.10:0":           true, // well-formed; the index says it is not a Service port
		"svc:10.96.0.10":             false,
		"svc:10.96.0.010:53":         false,
		"svc:10.96.0.10:053":         false,
		"svc:[fd00::1]:80":           false,
		"svc:[::ffff:10.96.0.10]:80": false,
		"svc:10.96.0.10:65536":       false,
		"10.96.0.10:53":              false,
		"passthrough_original_dst":   false,
		"":                           false,
	} {
		ap, err := ParseClusterName(name)
		if (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", name, err, ok)
			continue
		}
		if ok && ClusterName(ap.Addr(), ap.Port()) != name {
			t.Errorf("%q: round trip gave %s", name, ClusterName(ap.Addr(), ap.Port()))
		}
	}
}
