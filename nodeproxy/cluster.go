package nodeproxy

import (
	"net/netip"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/nodeproxy/internal/lb"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
)

// cluster is one version of a cluster, active or warming. A CDS update
// makes a new one, as Envoy's ClusterManagerImpl::loadCluster makes a new
// cluster (and, through ClusterFactoryImplBase::create, a new outlier
// DetectorImpl) for every update whose hash differs.
type cluster struct {
	cfg  *xdsconfig.Cluster
	seen applied // what /config_dump shows
	// For EDS clusters:
	assignment *xdsconfig.Assignment
	detector   *lb.Detector
	mu         sync.Mutex
	balancer   *lb.Balancer
	// warmTimer ends warming at the EDS initial_fetch_timeout (warming clusters only).
	warmTimer *time.Timer
}

// rebuild recomputes the balancer from the assignment and outlier state. It
// runs under c.mu so a rebuild after an ejection never publishes a balancer
// of an older assignment.
func (c *cluster) rebuild() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Type != xdsconfig.EDS || c.assignment == nil {
		return
	}
	pol := map[xdsconfig.LBPolicy]lb.Policy{xdsconfig.RoundRobin: lb.RoundRobin, xdsconfig.Random: lb.Random, xdsconfig.RingHash: lb.RingHash}[c.cfg.LB]
	prios := make([][]lb.Host, len(c.assignment.Priorities))
	for p, eps := range c.assignment.Priorities {
		for _, e := range eps {
			// An ejected host is unhealthy (FAILED_OUTLIER_CHECK) for load and selection.
			prios[p] = append(prios[p], lb.Host{Addr: e.Addr, Healthy: e.Healthy && (c.detector == nil || !c.detector.Ejected(e.Addr))})
		}
	}
	c.balancer = lb.New(lb.Config{Policy: pol, RingMin: c.cfg.RingMin, RingMax: c.cfg.RingMax,
		PanicThreshold: c.cfg.PanicThreshold, Overprovisioning: c.assignment.Overprovisioning}, prios)
}

func (c *cluster) pick(hash uint64, hasHash bool) (netip.AddrPort, bool) {
	c.mu.Lock()
	b := c.balancer
	c.mu.Unlock()
	if b == nil {
		return netip.AddrPort{}, false
	}
	return b.Pick(hash, hasHash)
}
