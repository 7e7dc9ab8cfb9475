package svcindex

import (
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChangesSince: each Service change names the ClusterIPs it touched (both, when the
// Service moved), a range change says so, and a reader too far behind is told to re-check all.
func TestChangesSince(t *testing.T) {
	x, err := newIndex(Options{RangeOverride: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	v0 := x.Version()
	x.setService(svc("ns", "a", []string{"10.96.0.10"}, tcp("http", 80, intstr.FromInt32(8080))))
	x.setService(svc("ns", "b", []string{"10.96.0.20"}, tcp("http", 80, intstr.FromInt32(8080))))
	v1 := x.Version()
	x.setService(svc("ns", "a", []string{"10.96.0.11"}, tcp("http", 80, intstr.FromInt32(8080)))) // moves
	c, now, ok := x.ChangesSince(v0)
	want := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.11"), netip.MustParseAddr("10.96.0.20")}
	if !ok || c.RangeMoved || now != x.Version() || !slices.Equal(c.IPs, want) {
		t.Fatalf("since %d: %+v now %d ok %v, want %v", v0, c, now, ok, want)
	}
	if c, _, ok := x.ChangesSince(v1); !ok || !slices.Equal(c.IPs, want[:2]) {
		t.Fatalf("since %d: %+v ok %v", v1, c, ok)
	}
	if c, _, ok := x.ChangesSince(now); !ok || len(c.IPs) != 0 || c.RangeMoved {
		t.Fatalf("since now: %+v ok %v", c, ok)
	}
	x.mu.Lock()
	x.override = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/15")}
	x.recomputeRangeLocked()
	x.mu.Unlock()
	if c, _, ok := x.ChangesSince(now); !ok || !c.RangeMoved {
		t.Fatalf("after a range change: %+v ok %v", c, ok)
	}
	mid := x.Version()
	for i := range changeLogSize + 1 {
		x.setService(svc("ns", "c", []string{"10.96.1.1"}, tcp("http", uint16Port(i), intstr.FromInt32(8080))))
	}
	if c, _, ok := x.ChangesSince(mid); ok || !c.RangeMoved {
		t.Fatalf("%d changes behind: %+v ok %v, want a full re-check", changeLogSize+1, c, ok)
	}
	if c, _, ok := x.ChangesSince(x.Version() - 1); !ok || !slices.Equal(c.IPs, []netip.Addr{netip.MustParseAddr("10.96.1.1")}) {
		t.Fatalf("one behind: %+v ok %v", c, ok)
	}
}

func uint16Port(i int) int32 { return int32(1 + i%60000) }
