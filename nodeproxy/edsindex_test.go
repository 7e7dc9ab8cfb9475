package nodeproxy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestEDSIndex: a name stays while any version (active or warming) needs it, the list stays
// sorted, and non-EDS clusters are not counted.
func TestEDSIndex(t *testing.T) {
	eds := func(name, assignment string) *cluster {
		return &cluster{cfg: &xdsconfig.Cluster{Name: name, Type: xdsconfig.EDS, EDSName: assignment}}
	}
	var x edsIndex
	active, warming := eds("svc:b", "b"), eds("svc:b", "b")
	x.add(active)
	x.add(eds("svc:c", "c"))
	x.add(eds("svc:a", "a"))
	x.add(&cluster{cfg: &xdsconfig.Cluster{Name: "passthrough", Type: xdsconfig.OriginalDst}})
	x.add(warming)
	if got := x.names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("names %v, want [a b c]", got)
	}
	x.remove(active)
	if got := x.names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("after the active version went, the warming one still needs b: %v", got)
	}
	x.remove(warming)
	x.remove(warming) // a second remove of a counted-out version changes nothing
	x.remove(nil)
	if got := x.names(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("names %v, want [a c]", got)
	}
	got := x.names()
	got[0] = "changed"
	if x.names()[0] != "a" {
		t.Error("names shares its slice with the index")
	}
}

// TestEDSIndexFollowsClusters: through random CDS and EDS deltas (new clusters warming,
// updates of active ones warming beside them, assignments activating them, removals), the
// index lists what a rebuild from every active and warming cluster lists.
func TestEDSIndexFollowsClusters(t *testing.T) {
	p := New(Options{})
	r := rand.New(rand.NewPCG(3, 4))
	name := func() string {
		return clusterOf(netip.AddrPortFrom(netip.MustParseAddr("10.96.0.1"), uint16(80+r.IntN(12))))
	}
	rebuilt := func() []string {
		p.mu.Lock()
		defer p.mu.Unlock()
		var out []string
		for _, m := range []map[string]*cluster{p.clusters, p.warming} {
			for _, c := range m {
				if c.cfg.Type == xdsconfig.EDS && !slices.Contains(out, c.cfg.EDSName) {
					out = append(out, c.cfg.EDSName)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	for i := range 400 {
		var err error
		switch n := name(); r.IntN(4) {
		case 0, 1: // a new version (another stat name: not equal to the last)
			err = p.applyClusters([]*clusterv3.Cluster{translate.Cluster(n, contract.StatName("ns", fmt.Sprint("s", i), 80), false)}, nil)
		case 2:
			err = p.applyAssignments([]*endpointv3.ClusterLoadAssignment{loadAssignment(n, []netip.AddrPort{netip.MustParseAddrPort("10.244.0.5:80")})}, nil)
		case 3:
			err = p.applyClusters(nil, []string{n})
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := p.edsNames(), rebuilt(); !slices.Equal(got, want) {
			t.Fatalf("step %d: index %v, rebuilt %v", i, got, want)
		}
	}
}
