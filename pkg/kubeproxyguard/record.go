package kubeproxyguard

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// recordPass counts the pass in Status.
func (g *Guard) recordPass(p *pass, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Passes++
	g.st.LastPass = p.start
	g.st.LastPassError = ""
	if err != nil {
		g.st.LastPassError = err.Error()
	}
}

// recordNoTable records a node without kube-proxy's table: no guarded
// Service is on its path.
func (g *Guard) recordNoTable(p *pass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.TablePresent = false
	if g.st.ProxyCut != nil && p.proxyErr == nil {
		g.st.ProxyCut.Resets = p.proxyResets
	}
	for _, s := range g.services {
		s.state, s.remaining, s.seenOff = StateClean, nil, true
		s.cutPorts, s.keptPorts, s.proxyCut = nil, nil, nil
	}
}

// recordProxyServices records a pass of the proxy cut for each Service it guarded: clean
// when the guard's set refuses the node proxy every ClusterIP . port of its cut ports, as
// kube-proxy has them; on-path when the set could not be written (the proxy's connections
// reach kube-proxy). kube-proxy never restores anything of the guard's table: there are no
// re-cuts to count.
func (g *Guard) recordProxyServices(p *pass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.TablePresent = true
	if p.proxyErr == nil {
		g.st.ProxyCut.Resets = p.proxyResets
	}
	for svc, st := range g.services {
		if !p.want[svc] {
			continue
		}
		o := p.tb.services[svc]
		if o == nil {
			o = &objects{}
		}
		g.recordPorts(svc, st, o)
		if err := p.restoreErrs[svc]; err != nil {
			st.noteError(err)
		}
		vps := p.proxyWant[svc]
		if p.proxyErr != nil {
			// What the set held before the failed write still refuses.
			var held []vipPort
			for _, v := range vps {
				if p.proxyHave[v] {
					held = append(held, v)
				}
			}
			st.proxyCut = held
			if len(held) < len(vps) {
				g.fail(svc, st, p.proxyErr)
				st.state, st.remaining = StateOnPath, o.names()
			} else {
				st.state, st.remaining = StateClean, nil
			}
			g.metrics.onPath.WithLabelValues(svc.Namespace, svc.Name).Set(boolFloat(st.state == StateOnPath))
			continue
		}
		var added []string
		for _, v := range vps {
			if p.proxyAdded[v] {
				added = append(added, v.String())
			}
		}
		if len(added) > 0 {
			st.deletions++
			g.metrics.deletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
			g.log.Info("refusing the node proxy's connections to the Service's cut ports; every other client keeps kube-proxy",
				"service", svc, "elements", added, "mark", fmt.Sprintf("%#x", contract.ProxyUpstreamMark))
		}
		st.proxyCut = vps
		st.seenOff = true
		st.state, st.remaining = StateClean, nil
		g.metrics.onPath.WithLabelValues(svc.Namespace, svc.Name).Set(0)
	}
}

// recordServices records what the pass saw and did for each Service it
// guarded.
func (g *Guard) recordServices(p *pass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.TablePresent = true
	for svc, st := range g.services {
		if !p.want[svc] {
			continue
		}
		o := p.tb.services[svc]
		if o == nil {
			o = &objects{}
		}
		g.recordPorts(svc, st, o)
		if err := p.restoreErrs[svc]; err != nil {
			st.noteError(err) // restoreCuts logged it
		}
		switch {
		case !slices.Contains(p.cut, svc):
			st.seenOff = true
			st.state, st.remaining = StateClean, nil
		case p.cutErrs[svc] != nil:
			g.fail(svc, st, p.cutErrs[svc])
			st.state, st.remaining = StateOnPath, o.names()
		default:
			g.recordCut(p, svc, st, o)
		}
		g.metrics.onPath.WithLabelValues(svc.Namespace, svc.Name).Set(boolFloat(st.state == StateOnPath))
	}
}

// recordPorts records which ports of svc the guard cuts and which it leaves
// to kube-proxy, and logs the latter when they change.
func (g *Guard) recordPorts(svc types.NamespacedName, st *serviceState, o *objects) {
	cut, kept := o.ports()
	st.cutPorts = nil
	for _, k := range cut {
		st.cutPorts = append(st.cutPorts, k.port())
	}
	var keptPorts []KeptPort
	var names, why []string
	for _, k := range kept {
		keptPorts = append(keptPorts, KeptPort{Port: k.port(), Reason: k.leftToKubeProxy()})
		names = append(names, k.port())
		if r := k.leftToKubeProxy(); !slices.Contains(why, r) {
			why = append(why, r)
		}
	}
	if len(keptPorts) > 0 && !slices.Equal(keptPorts, st.keptPorts) {
		g.log.Info("leaving ports of a guarded Service on kube-proxy's path", "service", svc, "ports", names, "reasons", why)
	}
	st.keptPorts = keptPorts
}

// recordCut records a committed cut: a re-deletion, with its latency from
// the observed restore, when the guard had seen the Service off the path.
func (g *Guard) recordCut(p *pass, svc types.NamespacedName, st *serviceState, o *objects) {
	for _, r := range o.names() {
		st.deleted[r] = struct{}{}
	}
	st.deletions++
	g.metrics.deletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
	if st.seenOff {
		st.redeletions++
		st.lastRedel = p.cutDone
		st.lastLatency = p.cutDone.Sub(p.observed)
		g.metrics.redeletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
		g.metrics.latency.Observe(st.lastLatency.Seconds())
		g.log.Info("cut kube-proxy ClusterIP entries again", "service", svc, "latency", st.lastLatency)
	} else {
		g.log.Info("cut kube-proxy ClusterIP entries", "service", svc, "ports", portNames(o.Elements))
	}
	st.seenOff = true
	st.state, st.remaining = StateClean, nil
}

func (g *Guard) fail(svc types.NamespacedName, st *serviceState, err error) {
	st.noteError(err)
	g.log.Warn("guard transaction failed; retrying", "service", svc, "err", err)
}

// noteError counts a failed transaction of the Service in its status.
func (st *serviceState) noteError(err error) {
	st.errors++
	st.lastError = err.Error()
	st.lastErrorAt = time.Now()
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
