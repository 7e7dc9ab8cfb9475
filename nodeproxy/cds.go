package nodeproxy

import (
	"errors"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
)

// applyClusters applies a CDS delta. Valid clusters are applied even when
// others fail (Envoy's CDS partial acceptance, source/common/upstream/cds_api_helper.cc
// onConfigUpdate); the error lists the rejected ones, which keep their last
// good version.
//
// As source/common/upstream/cluster_manager_impl.cc addOrUpdateCluster does,
// an update equal to the warming version (else to the active one) changes
// nothing; any other update is a new cluster with a fresh outlier detector:
// the old version's ejections are gone once the new one is active. An EDS
// cluster warms until its assignment arrives while the old version, if any,
// keeps serving. An update of an active cluster warms even when the
// assignment is known: a delta ADS client asks nothing for a name it already
// watches, so the new version waits for the server to send the assignment,
// or for the EDS initial_fetch_timeout, after which it uses the last one
// received (EdsClusterImpl::onConfigUpdateFailed with the ADS EDS resources
// cache) or, with none, none.
func (p *Proxy) applyClusters(upserts []*clusterv3.Cluster, removed []string) error {
	var errs []error
	var ready []string // names active after this update
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, raw := range upserts {
		cfg, err := xdsconfig.ParseCluster(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		active, warming := p.clusters[cfg.Name], p.warming[cfg.Name]
		if warming != nil && proto.Equal(warming.seen.msg, raw) || warming == nil && active != nil && proto.Equal(active.seen.msg, raw) {
			continue // blockUpdate: the same hash
		}
		p.stopWarmingLocked(cfg.Name)
		c := &cluster{cfg: cfg, seen: p.appliedLocked(clusterType, cfg.Name, raw)}
		if cfg.Type == xdsconfig.EDS {
			a, ok := p.assignments[cfg.EDSName]
			if !ok || active != nil {
				p.warmLocked(c, cfg.InitialFetchTimeout)
				continue
			}
			c.assignment = a
			p.attachDetector(c)
			c.rebuild()
		}
		p.setActiveLocked(c)
		ready = append(ready, cfg.Name)
	}
	for _, name := range removed {
		p.eds.remove(p.clusters[name])
		delete(p.clusters, name)
		p.stopWarmingLocked(name)
	}
	p.wakeDemandsLocked(ready, removed)
	return errors.Join(errs...)
}

// warmLocked makes c the warming version of its name until its assignment
// arrives or timeout (0: none) passes.
func (p *Proxy) warmLocked(c *cluster, timeout time.Duration) {
	p.eds.remove(p.warming[c.cfg.Name])
	p.warming[c.cfg.Name] = c
	p.eds.add(c)
	if timeout > 0 {
		c.warmTimer = time.AfterFunc(timeout, func() { p.initialFetchTimedOut(c) })
	}
}

// stopWarmingLocked drops the warming version of name, if any.
func (p *Proxy) stopWarmingLocked(name string) {
	if w := p.warming[name]; w != nil {
		if w.warmTimer != nil {
			w.warmTimer.Stop()
		}
		p.eds.remove(w)
		delete(p.warming, name)
	}
}

// activateLocked makes the warming c active with assignment a.
func (p *Proxy) activateLocked(c *cluster, a *xdsconfig.Assignment) {
	p.stopWarmingLocked(c.cfg.Name)
	c.assignment = a
	p.attachDetector(c)
	c.rebuild()
	p.setActiveLocked(c)
}

// setActiveLocked makes c the active version of its name, in place of the one before.
func (p *Proxy) setActiveLocked(c *cluster) {
	p.eds.remove(p.clusters[c.cfg.Name])
	p.clusters[c.cfg.Name] = c
	p.eds.add(c)
}

// initialFetchTimedOut ends c's warming at the EDS initial_fetch_timeout
// with the last assignment received for its name, or an empty one.
func (p *Proxy) initialFetchTimedOut(c *cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.warming[c.cfg.Name] != c {
		return
	}
	a, ok := p.assignments[c.cfg.EDSName]
	if !ok {
		a = &xdsconfig.Assignment{ClusterName: c.cfg.EDSName, Overprovisioning: 140}
	}
	p.log.Debug("cluster warmed by the EDS initial fetch timeout", "cluster", c.cfg.Name, "cached_assignment", ok)
	p.activateLocked(c, a)
	p.wakeDemandsLocked([]string{c.cfg.Name}, nil)
}
