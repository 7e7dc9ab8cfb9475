package nodeproxy

// Draining: connections accepted under a filter chain that an LDS update
// changed or removed are closed --drain-time-s after the update
// (listener_manager_impl.cc ListenerManagerImpl::drainFilterChains for an
// in-place update, drainListener for a full update or a removal; both start a
// timer of the server's drain time). tcp_proxy takes no part in draining (only
// the HTTP connection manager, Redis and Mongo do, docs
// intro/arch_overview/operations/draining.rst), so its connections carry on
// untouched until the timer fires, then are closed without flushing
// (active_stream_listener_base.cc OwnedActiveStreamListenerBase::removeFilterChain,
// ConnectionCloseType::NoFlush).

import (
	"slices"
	"sync"
	"time"
)

// DefaultDrainTime is Envoy's --drain-time-s default (source/server/options_impl.cc).
const DefaultDrainTime = 600 * time.Second

// filterChain is a filter chain as the listener manager tracks it: the same
// object across in-place updates that keep its proto, so its connections
// survive them.
type filterChain struct {
	key    string // chainKey
	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	closed bool // its drain ended: a late registration is closed at once
}

func newFilterChain(key string) *filterChain {
	return &filterChain{key: key, conns: map[*proxyConn]struct{}{}}
}

// add registers pc; false (and pc closed) when the chain's drain already ended.
func (fc *filterChain) add(pc *proxyConn) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.closed {
		pc.close()
		return false
	}
	fc.conns[pc] = struct{}{}
	return true
}

func (fc *filterChain) remove(pc *proxyConn) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	delete(fc.conns, pc)
}

// closeAll ends the drain: every connection of the chain is closed.
func (fc *filterChain) closeAll() {
	fc.mu.Lock()
	fc.closed = true
	conns := make([]*proxyConn, 0, len(fc.conns))
	for pc := range fc.conns {
		conns = append(conns, pc)
	}
	fc.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
}

// drainingListener is a listener replaced by a full update or removed, whose
// connections are draining (/config_dump draining_state).
type drainingListener struct {
	name string
	seen applied
}

// drainTime is how long a drain lasts.
func (p *Proxy) drainTime() time.Duration {
	switch {
	case p.opts.DrainTime == 0:
		return DefaultDrainTime
	case p.opts.DrainTime < 0:
		return 0
	}
	return p.opts.DrainTime
}

// afterDrain runs f when the drain time has passed; closeAll stops the
// pending ones (it closes every connection itself).
func (p *Proxy) afterDrain(f func()) {
	p.drainMu.Lock()
	defer p.drainMu.Unlock()
	if p.drainsStopped {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(p.drainTime(), func() {
		p.drainMu.Lock()
		_, pending := p.drains[t]
		delete(p.drains, t)
		p.drainMu.Unlock()
		if pending {
			f()
		}
	})
	p.drains[t] = struct{}{}
}

// drainFilterChains drains the chains of prev that next no longer has
// (ListenerImpl::diffFilterChain), after an in-place update. The gauge
// listener_manager.total_filter_chains_draining counts them meanwhile.
func (p *Proxy) drainFilterChains(prev, next *listenerVersion) {
	kept := map[*filterChain]bool{}
	for _, fc := range next.chains {
		kept[fc] = true
	}
	var gone []*filterChain
	for _, fc := range prev.chains {
		if !kept[fc] {
			gone = append(gone, fc)
		}
	}
	if len(gone) == 0 {
		return
	}
	p.chainsDraining.Add(int64(len(gone)))
	p.log.Debug("draining filter chains", "listener", prev.cfg.Name, "chains", len(gone), "drain_time", p.drainTime())
	p.afterDrain(func() {
		for _, fc := range gone {
			fc.closeAll()
		}
		p.chainsDraining.Add(-int64(len(gone)))
	})
}

// drainListener drains every chain of a replaced or removed listener version.
// The gauge listener_manager.total_listeners_draining counts it meanwhile.
func (p *Proxy) drainListener(name string, v *listenerVersion, seen applied) {
	d := &drainingListener{name: name, seen: seen}
	p.mu.Lock()
	p.draining = append(p.draining, d)
	p.mu.Unlock()
	p.log.Debug("draining listener", "listener", name, "drain_time", p.drainTime())
	p.afterDrain(func() {
		for _, fc := range v.chains {
			fc.closeAll()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.draining = slices.DeleteFunc(p.draining, func(x *drainingListener) bool { return x == d })
	})
}

// stopDrains cancels the pending drains (at shutdown, which closes every connection).
func (p *Proxy) stopDrains() {
	p.drainMu.Lock()
	defer p.drainMu.Unlock()
	p.drainsStopped = true
	for t := range p.drains {
		t.Stop()
	}
	p.drains = map[*time.Timer]struct{}{}
}
