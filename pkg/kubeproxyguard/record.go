package kubeproxyguard

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
func (g *Guard) recordNoTable() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.TablePresent = false
	for _, s := range g.services {
		s.state, s.remaining, s.seenOff = StateClean, nil, true
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
		g.log.Info("cut kube-proxy ClusterIP entries", "service", svc, "elements", len(o.Elements))
	}
	st.seenOff = true
	st.state, st.remaining = StateClean, nil
}

func (g *Guard) fail(svc types.NamespacedName, st *serviceState, err error) {
	st.errors++
	st.lastError = err.Error()
	st.lastErrorAt = time.Now()
	g.log.Warn("guard transaction failed; retrying", "service", svc, "err", err)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
