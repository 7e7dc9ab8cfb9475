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

// recordNoTable records a node without kube-proxy's table: nothing of any
// guarded Service is there.
func (g *Guard) recordNoTable() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.TablePresent = false
	for _, s := range g.services {
		s.state, s.remaining, s.seenOff = StateClean, nil, true
	}
}

// recordServices records what the pass saw and did for each Service it
// guarded, and sets p.next for the chains it cut.
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
		cut, del := slices.Contains(p.cut, svc), slices.Contains(p.del, svc)
		switch {
		case cut && p.cutErrs[svc] != nil:
			g.fail(svc, st, p.cutErrs[svc])
			st.state, st.remaining = StateOnPath, o.names()
			continue // the on-path gauge keeps its value
		case del && p.delErrs[svc] != nil:
			g.fail(svc, st, p.delErrs[svc])
			st.chainRetryAt = time.Now().Add(chainRetryDelay)
			st.state, st.remaining = StateCut, chainRefs(o)
			continue
		case cut:
			g.recordCut(p, svc, st, o)
		case del:
			g.recordChainsDeleted(svc, st, o)
		case o.empty():
			st.seenOff = true
			st.cutAt = time.Time{}
			st.state, st.remaining = StateClean, nil
		default: // only empty chains, not yet due
			st.seenOff = true
			st.state, st.remaining = StateCut, chainRefs(o)
		}
		g.metrics.onPath.WithLabelValues(svc.Namespace, svc.Name).Set(boolFloat(st.state == StateOnPath))
	}
}

// recordCut records a committed cut: a re-deletion, with its latency from
// the observed restore, when the guard had seen the Service off the path.
func (g *Guard) recordCut(p *pass, svc types.NamespacedName, st *serviceState, o *objects) {
	for _, r := range o.names() {
		if r.Kind != KindChain {
			st.deleted[r] = struct{}{}
		}
	}
	st.deletions++
	g.metrics.deletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
	if st.seenOff {
		st.redeletions++
		st.lastRedel = p.cutDone
		st.lastLatency = p.cutDone.Sub(p.observed)
		g.metrics.redeletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
		g.metrics.latency.Observe(st.lastLatency.Seconds())
		g.log.Info("re-deleted kube-proxy objects", "service", svc, "latency", st.lastLatency)
	} else {
		g.log.Info("deleted kube-proxy objects", "service", svc, "objects", len(o.names()))
	}
	st.seenOff = true
	st.cutAt = p.cutDone
	st.chainRetryAt = time.Time{}
	st.state, st.remaining = StateCut, chainRefs(o)
	p.next = sooner(p.next, p.cutDone.Add(ChainDeleteDelay))
}

// recordChainsDeleted records a committed chain deletion: nothing of the
// Service is left.
func (g *Guard) recordChainsDeleted(svc types.NamespacedName, st *serviceState, o *objects) {
	for _, c := range chainRefs(o) {
		st.deleted[c] = struct{}{}
	}
	st.seenOff = true
	st.cutAt, st.chainRetryAt = time.Time{}, time.Time{}
	st.state, st.remaining = StateClean, nil
	g.log.Info("deleted kube-proxy chains", "service", svc, "chains", len(o.Chains))
}

func (g *Guard) fail(svc types.NamespacedName, st *serviceState, err error) {
	st.errors++
	st.lastError = err.Error()
	st.lastErrorAt = time.Now()
	g.log.Warn("guard transaction failed; retrying", "service", svc, "err", err)
}

func chainRefs(o *objects) []ObjectRef {
	var r []ObjectRef
	for _, c := range o.Chains {
		r = append(r, ObjectRef{Kind: KindChain, Name: c.Name})
	}
	return r
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
