package nodeproxy

import (
	"context"
	"net/netip"
	"time"

	"github.com/aether-mesh/svclb/nodeproxy/internal/lb"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
)

func outlierConfig(o *xdsconfig.Outlier) lb.OutlierConfig {
	return lb.OutlierConfig{Consecutive: o.ConsecutiveLocalOriginFailure, EnforcingPercent: o.EnforcingLocalOrigin,
		AlwaysEjectOneHost: o.AlwaysEjectOneHost, MaxEjectionPercent: o.MaxEjectionPercent,
		BaseEjectionTime: o.BaseEjectionTime, MaxEjectionTime: o.MaxEjectionTime, Interval: o.Interval}
}

// attachDetector gives an EDS cluster with outlier_detection its detector
// (a new one for a cluster not yet published) and tells it the hosts.
func (p *Proxy) attachDetector(c *cluster) {
	if c.cfg.Outlier == nil {
		return
	}
	if c.detector == nil {
		c.detector = lb.NewDetector(outlierConfig(c.cfg.Outlier), p.now) // only before the cluster is published
	}
	var hosts []netip.AddrPort
	for _, eps := range c.assignment.Priorities {
		for _, e := range eps {
			hosts = append(hosts, e.Addr)
		}
	}
	c.detector.SetHosts(hosts)
}

// sweepOutliers ticks every detector each second; a detector sweeps only
// when its own outlier_detection.interval has passed.
func (p *Proxy) sweepOutliers(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.sweepOnce()
	}
}

func (p *Proxy) sweepOnce() {
	p.mu.Lock()
	var cs []*cluster
	for _, c := range p.clusters {
		if c.detector != nil {
			cs = append(cs, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		if c.detector.Sweep() {
			c.rebuild()
		}
	}
}
