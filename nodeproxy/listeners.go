package nodeproxy

// The listener manager: LDS updates applied as Envoy's
// source/common/listener_manager/listener_manager_impl.cc does
// (addOrUpdateListenerInternal, inPlaceFilterChainUpdate, drainFilterChains,
// drainListener, removeListenerInternal).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/svclb/nodeproxy/internal/netnsbind"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Envoy's listener manager counters (listener_manager_impl.h ALL_LISTENER_MANAGER_STATS).
const (
	statListenerAdded    = "listener_manager.listener_added"
	statListenerModified = "listener_manager.listener_modified"
	statListenerRemoved  = "listener_manager.listener_removed"
	statListenerInPlace  = "listener_manager.listener_in_place_updated"
)

// listener is a bound socket and its accept loop. Its version is swapped on
// every update that keeps the socket.
type listener struct {
	mu   sync.RWMutex
	cur  *listenerVersion
	seen applied // what /config_dump shows; under mu
	ln   net.Listener
	done chan struct{}
	// quit is closed by shut: it ends an accept loop's backoff wait.
	quit     chan struct{}
	quitOnce sync.Once
}

func newListener(v *listenerVersion, seen applied, ln net.Listener) *listener {
	return &listener{cur: v, seen: seen, ln: ln, done: make(chan struct{}), quit: make(chan struct{})}
}

// listenerVersion is one applied version of a listener, what a connection
// accepted under it selects its filter chain from.
type listenerVersion struct {
	cfg *xdsconfig.Listener
	raw *listenerv3.Listener
	// chains maps each parsed chain (the named ones and the default one) to
	// the tracked filter chain its connections register with.
	chains map[*xdsconfig.Chain]*filterChain
	// logs maps each tcp_proxy access log to its gRPC access logger.
	logs map[*xdsconfig.AccessLog]*alsLogger
}

func (l *listener) version() *listenerVersion {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cur
}

func (l *listener) config() *xdsconfig.Listener { return l.version().cfg }

// shut closes the socket; the accept loop ends at once.
func (l *listener) shut() {
	l.quitOnce.Do(func() { close(l.quit) })
	l.ln.Close()
}

func (l *listener) stop() {
	l.shut()
	<-l.done
}

func sameSocket(a, b *xdsconfig.Listener) bool {
	return a.Addr == b.Addr && a.NetnsPath == b.NetnsPath && a.Transparent == b.Transparent
}

// filterChainOnlyChange is listener_impl.cc ListenerMessageUtil::filterChainOnlyChange:
// the listeners differ in nothing but filter_chains, default_filter_chain and
// filter_chain_matcher. (Envoy compares repeated fields as sets; the only
// other repeated field in the subset, listener_filters, holds one filter.)
func filterChainOnlyChange(a, b *listenerv3.Listener) bool {
	strip := func(l *listenerv3.Listener) *listenerv3.Listener {
		c := proto.Clone(l).(*listenerv3.Listener)
		c.FilterChains, c.DefaultFilterChain, c.FilterChainMatcher = nil, nil, nil
		return c
	}
	return proto.Equal(strip(a), strip(b))
}

// supportUpdateFilterChain is listener_impl.cc ListenerImpl::supportUpdateFilterChain
// for the subset: a new config without filter_chains (only a default chain)
// is a full update, as is any change outside the three chain fields.
func supportUpdateFilterChain(old, updated *listenerv3.Listener) bool {
	return len(updated.GetFilterChains()) > 0 && filterChainOnlyChange(old, updated)
}

// chainKey identifies a filter chain by its whole proto, as
// filter_chain_manager_impl.h FcContextMap (keyed by the FilterChain message,
// MessageUtil hash and equality) does: renaming a chain or changing any field
// inside it makes it another chain. The default chain is compared only with
// the default chain (ListenerImpl::diffFilterChain).
func chainKey(fc *listenerv3.FilterChain, isDefault bool) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fc)
	if err != nil {
		panic(fmt.Sprintf("marshal a parsed filter chain: %v", err)) // it was just unmarshalled
	}
	if isDefault {
		return "default\x00" + string(b)
	}
	return "named\x00" + string(b)
}

// newVersion builds the tracked chains of cfg. With prev (an in-place
// update), a chain whose proto prev also has is prev's very filterChain, so its
// connections carry on (FilterChainManagerImpl::findExistingFilterChain).
func (p *Proxy) newVersion(cfg *xdsconfig.Listener, raw *listenerv3.Listener, prev *listenerVersion) *listenerVersion {
	old := map[string]*filterChain{}
	if prev != nil {
		for _, fc := range prev.chains {
			old[fc.key] = fc
		}
	}
	v := &listenerVersion{cfg: cfg, raw: raw, chains: map[*xdsconfig.Chain]*filterChain{}, logs: map[*xdsconfig.AccessLog]*alsLogger{}}
	track := func(c *xdsconfig.Chain, rawChain *listenerv3.FilterChain, isDefault bool) {
		key := chainKey(rawChain, isDefault)
		fc := old[key]
		if fc == nil {
			fc = newFilterChain(key)
		}
		v.chains[c] = fc
	}
	for _, rc := range raw.GetFilterChains() {
		track(cfg.Chains[rc.GetName()], rc, false)
	}
	if cfg.Default != nil {
		track(cfg.Default, raw.GetDefaultFilterChain(), true)
	}
	for _, c := range cfg.AllChains() {
		for i := range c.TCP.AccessLogs {
			al := &c.TCP.AccessLogs[i]
			v.logs[al] = p.als.logger(alsKeyOf(al))
		}
	}
	return v
}

// applyListeners applies an LDS delta: parse, then bind new sockets (a bind
// failure rejects that listener, like Envoy's listener manager), then swap.
// Connections accepted under a filter chain the update changes or removes
// are drained: closed when the drain time has passed.
func (p *Proxy) applyListeners(ctx context.Context, upserts []*listenerv3.Listener, removed []string) error {
	var errs []error
	for _, raw := range upserts {
		cfg, err := xdsconfig.ParseListener(raw)
		if err == nil {
			err = p.checkAccessLogClusters(cfg)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.mu.Lock()
		old := p.listeners[cfg.Name]
		p.mu.Unlock()
		var prev *listenerVersion
		if old != nil {
			if prev = old.version(); proto.Equal(prev.raw, raw) {
				// addOrUpdateListenerInternal: an update with the active
				// listener's hash is blocked; nothing changes.
				continue
			}
		}
		p.initOnDemandStats(cfg)
		p.mu.Lock()
		seen := p.appliedLocked(listenerType, cfg.Name, raw)
		p.mu.Unlock()
		if old != nil && sameSocket(prev.cfg, cfg) {
			// Same address: Envoy keeps (clones) the socket whichever path it takes.
			inPlace := supportUpdateFilterChain(prev.raw, raw)
			base := prev
			if !inPlace {
				base = nil
			}
			v := p.newVersion(cfg, raw, base)
			old.mu.Lock()
			oldSeen := old.seen
			old.cur, old.seen = v, seen
			old.mu.Unlock()
			p.stats.inc(statListenerModified)
			if inPlace {
				p.stats.inc(statListenerInPlace)
				p.drainFilterChains(prev, v)
			} else {
				p.drainListener(cfg.Name, prev, oldSeen)
			}
			continue
		}
		ln, err := netnsbind.Listen(ctx, cfg.NetnsPath, cfg.Addr, cfg.Transparent)
		if err != nil {
			err = fmt.Errorf("listener %s: %w", cfg.Name, err)
			errs = append(errs, err)
			p.mu.Lock()
			p.bindErrors[cfg.Name] = listenerError{cfg: cfg, err: err.Error(), seen: seen}
			p.mu.Unlock()
			continue
		}
		l := newListener(p.newVersion(cfg, raw, nil), seen, ln)
		// Envoy's listener stats exist, at 0, from the listener's creation.
		p.stats.add(listenerStatPrefix(cfg)+statGlobalCxOverflow, 0)
		p.mu.Lock()
		p.listeners[cfg.Name] = l
		delete(p.bindErrors, cfg.Name)
		p.mu.Unlock()
		if old != nil {
			// Another socket: the old listener stops accepting and drains.
			old.stop()
			old.mu.RLock()
			oldSeen := old.seen
			old.mu.RUnlock()
			p.drainListener(cfg.Name, prev, oldSeen)
			p.stats.inc(statListenerModified)
		} else {
			p.stats.inc(statListenerAdded)
		}
		p.wg.Add(1)
		go p.serve(l)
		p.log.Info("listener bound", "name", cfg.Name, "address", cfg.Addr, "netns", cfg.NetnsPath)
	}
	for _, name := range removed {
		p.mu.Lock()
		l := p.listeners[name]
		delete(p.listeners, name)
		delete(p.bindErrors, name)
		p.mu.Unlock()
		if l != nil {
			// removeListenerInternal → drainListener: the socket closes now,
			// its connections when the drain time has passed.
			l.stop()
			l.mu.RLock()
			v, seen := l.cur, l.seen
			l.mu.RUnlock()
			p.drainListener(name, v, seen)
			p.stats.inc(statListenerRemoved)
			p.log.Info("listener removed", "name", name)
		}
	}
	return errors.Join(errs...)
}

// listenerError is a listener whose socket could not be bound (NACKed).
type listenerError struct {
	cfg  *xdsconfig.Listener
	err  string
	seen applied // the configuration that failed
}

func (p *Proxy) checkAccessLogClusters(l *xdsconfig.Listener) error {
	for _, c := range l.AllChains() {
		for _, al := range c.TCP.AccessLogs {
			// contract.XDSCluster, the bootstrap's static cluster for the agent's socket, is the
			// only gRPC cluster this proxy has.
			if al.Cluster != contract.XDSCluster {
				return fmt.Errorf("listener %s chain %s: access log cluster %q: only the bootstrap cluster %s is supported", l.Name, c.Name, al.Cluster, contract.XDSCluster)
			}
		}
	}
	return nil
}
