package nodeproxy

import (
	"errors"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
)

// setAssignment replaces an active cluster's assignment and rebuilds; the
// outlier detector keeps the state of the hosts still present
// (DetectorImpl's member update callback).
func (p *Proxy) setAssignment(c *cluster, a *xdsconfig.Assignment) {
	c.mu.Lock()
	c.assignment = a
	c.mu.Unlock()
	p.attachDetector(c)
	c.rebuild()
}

// edsNames lists the assignments the active and warming EDS clusters need, sorted.
func (p *Proxy) edsNames() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eds.names()
}

// applyAssignments applies an EDS delta; invalid assignments keep their last good version.
func (p *Proxy) applyAssignments(upserts []*endpointv3.ClusterLoadAssignment, removed []string) error {
	var errs []error
	var active []string
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, raw := range upserts {
		a, err := xdsconfig.ParseAssignment(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.assignments[a.ClusterName] = a
		p.rawAssignments[a.ClusterName] = p.appliedLocked(endpointType, a.ClusterName, raw)
		var warmed []*cluster
		for _, c := range p.warming {
			if c.cfg.EDSName == a.ClusterName {
				warmed = append(warmed, c)
			}
		}
		for _, c := range p.clusters {
			if c.cfg.Type == xdsconfig.EDS && c.cfg.EDSName == a.ClusterName {
				p.setAssignment(c, a)
			}
		}
		for _, c := range warmed {
			p.activateLocked(c, a)
			active = append(active, c.cfg.Name)
		}
	}
	for _, name := range removed {
		// A removed assignment leaves its clusters without hosts, as Envoy does.
		empty := &xdsconfig.Assignment{ClusterName: name, Overprovisioning: 140}
		delete(p.assignments, name)
		delete(p.rawAssignments, name)
		for _, c := range p.clusters {
			if c.cfg.Type == xdsconfig.EDS && c.cfg.EDSName == name {
				p.setAssignment(c, empty)
			}
		}
	}
	p.wakeDemandsLocked(active, nil)
	return errors.Join(errs...)
}
