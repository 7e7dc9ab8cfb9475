package nodeproxy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// BenchmarkEDSNames: what the ADS client asks of the proxy after every CDS response, with
// 5,000 EDS clusters: the index's copy, against a rebuild from every cluster (map and sort,
// as edsNames did before the index).
func BenchmarkEDSNames(b *testing.B) {
	p := New(Options{})
	var cs []*clusterv3.Cluster
	for i := range 5000 {
		n := clusterOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80))
		cs = append(cs, translate.Cluster(n, contract.StatName("ns", fmt.Sprint("s", i), 80), false))
	}
	if err := p.applyClusters(cs, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			_ = p.edsNames()
		}
	})
	b.Run("rebuild", func(b *testing.B) {
		for b.Loop() {
			set := map[string]bool{}
			for _, m := range []map[string]*cluster{p.clusters, p.warming} {
				for _, c := range m {
					if c.cfg.Type == xdsconfig.EDS {
						set[c.cfg.EDSName] = true
					}
				}
			}
			names := make([]string, 0, len(set))
			for n := range set {
				names = append(names, n)
			}
			slices.Sort(names)
		}
	})
}
