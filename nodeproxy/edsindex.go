package nodeproxy

import (
	"slices"

	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
)

// edsIndex is the sorted set of assignment names that the active and warming EDS clusters
// need, kept as clusters come and go: the ADS client asks for it after every CDS response,
// and rebuilding it from every cluster then (a map and a sort of all of them, under the
// proxy's lock) was the largest cost of an on-demand first connection with thousands of
// clusters. refs counts the cluster versions (active and warming) that need each name.
type edsIndex struct {
	refs   map[string]int
	sorted []string
}

// add counts c, an active or warming version, if it is an EDS cluster.
func (x *edsIndex) add(c *cluster) {
	if c == nil || c.cfg.Type != xdsconfig.EDS {
		return
	}
	if x.refs == nil {
		x.refs = map[string]int{}
	}
	name := c.cfg.EDSName
	x.refs[name]++
	if x.refs[name] == 1 {
		i, _ := slices.BinarySearch(x.sorted, name)
		x.sorted = slices.Insert(x.sorted, i, name)
	}
}

// remove uncounts c, a version that add counted.
func (x *edsIndex) remove(c *cluster) {
	if c == nil || c.cfg.Type != xdsconfig.EDS {
		return
	}
	name := c.cfg.EDSName
	if x.refs[name] == 0 {
		return
	}
	x.refs[name]--
	if x.refs[name] == 0 {
		delete(x.refs, name)
		if i, ok := slices.BinarySearch(x.sorted, name); ok {
			x.sorted = slices.Delete(x.sorted, i, i+1)
		}
	}
}

// names is a copy of the set, sorted.
func (x *edsIndex) names() []string { return slices.Clone(x.sorted) }
