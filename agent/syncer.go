// The syncer: its state, its loop, and sync, which turns what is dirty into one validated,
// published change. Events reach it through intake.go; a sync's change is built in batch.go.

package agent

import (
	"cmp"
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	k8stypes "k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/ratelog"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// unresolvedRetry rechecks captured pods whose netns did not show up yet (CNI still running).
const unresolvedRetry = 2 * time.Second

// publisher is what the syncer pushes to; *xdsserver.Server satisfies it.
type publisher interface {
	Apply(xdsserver.Update) error
}

// netnsFinder resolves a pod IP to its network namespace file; *netnsfind.Scanner satisfies
// it. Inside Snapshot every Find answers from one read of the namespaces.
type netnsFinder interface {
	Find(netip.Addr) (string, error)
	Snapshot() (release func())
}

// serviceIndex is the part of *svcindex.Index the syncer needs: the range for the listeners,
// Lookup to classify on-demand names and ChangesSince to re-check only what changed.
type serviceIndex interface {
	Range() ([]netip.Prefix, bool)
	Lookup(netip.AddrPort) svcindex.Result
	ChangesSince(uint64) (svcindex.Changes, uint64, bool)
}

// syncer turns the informers' state into resource updates. Events only mark what is dirty;
// sync (one goroutine) rebuilds exactly that, validates, and publishes.
type syncer struct {
	log      *slog.Logger
	pub      publisher
	services corelisters.ServiceLister
	slices   cache.Indexer // EndpointSlices, indexed byServiceIndex
	pods     cache.Store   // captured pods on this node
	netns    netnsFinder
	enroll   *enrollment  // pods the CNI plugin enrolled; nil: no CNI enrollment
	svcIndex serviceIndex // the Service index: the listeners' range, on-demand names classified
	m        *metrics

	mu             sync.Mutex // guards the pending state below
	dirty          map[k8stypes.NamespacedName]struct{}
	triggers       map[k8stypes.NamespacedName]time.Time
	dirtyAll       bool
	dirtyListeners bool
	node           translate.Node
	nodeAddrs      []netip.Addr // the node's own IPv4 addresses, refused by every listener
	phase1, phase2 bool
	reset          bool // contract.KeyRefusal is contract.RefusalReset (in force with both phases)
	mode           agentstatus.CDSMode
	settingsErrs   []agentstatus.SettingError // the ConfigMap's keys whose values are not used
	demandOps      []demandOp                 // the proxy's CDS requests since the last sync, in order
	restored       []string                   // names loaded from the demand file, for the first sync
	kick           chan struct{}
	retry          *time.Timer // rechecks unresolved captured pods
	clock          clock.Clock // times the coalescing windows (coalesce.go)
	maxCoalesce    time.Duration

	// Owned by the sync goroutine.
	published
	version uint64
	demand  *demand
	// refusalGate limits the on-demand refusal lines per reason; refusalWake asks for a sync
	// that writes what it held back (refusallog.go). Both under demand.mu.
	refusalGate ratelog.Keyed[string]
	refusalWake *time.Timer
	rangeSaid   rangeState // what was last logged about the Service range
	// When each pod whose IP more than one namespace holds was last warned about (batch.go).
	ambiguousSaid map[k8stypes.NamespacedName]time.Time
	// refuser keeps the pods' refuse tables; refusePods are the captured pods it was last
	// given (the last listeners rebuild's).
	refuser    *refuser
	refusePods []agentstatus.ListenerStatus

	status atomic.Pointer[agentstatus.Status]
}

func newSyncer(log *slog.Logger, pub publisher, services corelisters.ServiceLister, slices cache.Indexer, pods cache.Store,
	netns netnsFinder, svcIndex serviceIndex, m *metrics, node translate.Node, phase1, phase2 bool) *syncer {
	s := &syncer{
		log: log, pub: pub, services: services, slices: slices, pods: pods, netns: netns, svcIndex: svcIndex, m: m,
		dirty: map[k8stypes.NamespacedName]struct{}{}, triggers: map[k8stypes.NamespacedName]time.Time{},
		dirtyAll: true, dirtyListeners: true, node: node, phase1: phase1, phase2: phase2,
		mode: agentstatus.CDSProactive, settingsErrs: []agentstatus.SettingError{}, demand: newDemand(DefaultOnDemandMax, ""),
		kick: make(chan struct{}, 1), clock: clock.RealClock{}, maxCoalesce: maxCoalesce,
		published: published{
			set: translate.Set{
				Clusters:  map[string]*clusterv3.Cluster{},
				Loads:     map[string]*endpointv3.ClusterLoadAssignment{},
				Listeners: map[string]*listenerv3.Listener{},
			},
			bySvc: map[k8stypes.NamespacedName][]string{}, owner: map[string]k8stypes.NamespacedName{},
			endpoints: map[k8stypes.NamespacedName]int{}, refused: refused{}, served: map[k8stypes.NamespacedName][]netip.AddrPort{},
		},
		refuser:     newRefuser(log),
		refusalGate: ratelog.Keyed[string]{Limit: refusalLimit},
	}
	s.status.Store(&agentstatus.Status{Node: node.Name, Zone: node.Zone, NodeAddresses: []string{}, Phase1: phase1, Phase2: phase2, Listeners: []agentstatus.ListenerStatus{}, CDS: agentstatus.CDSProactive,
		SettingsErrors: []agentstatus.SettingError{}})
	return s
}

// configureDemand sets the CDS mode, the admitted-set cap and the demand file; call it before
// the first sync.
func (s *syncer) configureDemand(mode agentstatus.CDSMode, max int, file string) {
	s.mode = mode
	s.demand = newDemand(max, file)
	st := *s.status.Load()
	st.CDS = mode
	s.status.Store(&st)
}

// loop rebuilds like kube-proxy's bounded-frequency runner: a change while the loop is idle is
// pushed at once (no added latency); what follows a push is coalesced into the next one
// (coalesce decides when that is), and the loop is idle again once a debounce passes with
// nothing new.
func (s *syncer) loop(ctx context.Context, rangeChanged func() <-chan struct{}, debounce time.Duration) {
	debounce = max(debounce, time.Millisecond)
	changed := rangeChanged()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			changed = rangeChanged() // the range may have moved: listeners carry it
			s.listenersChanged()
			continue
		case <-s.kick:
		}
		window := debounce
		for more := true; more; {
			select {
			case <-changed: // a sustained burst must not starve a range change
				changed = rangeChanged()
				s.listenersChanged()
			default:
			}
			if err := s.sync(); err != nil {
				s.log.Error("sync failed", "error", err)
			}
			var ok bool
			if more, window, ok = s.coalesce(ctx, window, debounce); !ok {
				return
			}
		}
	}
}

// input is what a batch of this sync reads: the syncer's listers and views, and the node and
// phases sync took under the lock.
func (s *syncer) input(node translate.Node, nodeAddrs []netip.Addr, p1, p2, onDemand, full bool) batchInput {
	return batchInput{
		log: s.log, services: s.services, slices: s.slices, pods: s.pods, netns: s.netns,
		enrolled: s.enroll.capturedPods, index: s.svcIndex, demand: s.demand, unresolved: s.unresolved,
		node: node, nodeAddrs: nodeAddrs, phase1: p1, phase2: p2, onDemand: onDemand, full: full,
	}
}

// sync rebuilds what is dirty and publishes the change. A change that fails validation is
// not published: the last good resources stay with the proxy, and the error is returned.
func (s *syncer) sync() error {
	s.mu.Lock()
	dirty, triggers, all, listeners := s.dirty, s.triggers, s.dirtyAll, s.dirtyListeners
	node, nodeAddrs, p1, p2, mode, settingsErrs := s.node, s.nodeAddrs, s.phase1, s.phase2, s.mode, s.settingsErrs
	resetSet := s.reset
	reset := resetSet && p1 && p2 // in force
	ops, restored := s.demandOps, s.restored
	s.dirty, s.triggers = map[k8stypes.NamespacedName]struct{}{}, map[k8stypes.NamespacedName]time.Time{}
	s.dirtyAll, s.dirtyListeners = false, false
	s.demandOps, s.restored = nil, nil
	s.mu.Unlock()

	start := time.Now()
	s.applyDemand(ops, restored, dirty)
	if all {
		for k := range s.bySvc {
			dirty[k] = struct{}{}
		}
		svcs, _ := s.services.List(everything)
		for _, svc := range svcs {
			dirty[k8stypes.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = struct{}{}
		}
		listeners = true
	}
	b := newBatch(s.input(node, nodeAddrs, p1, p2, mode == agentstatus.CDSOnDemand, all), s.published)
	// Services that are gone first, so a VIP they held is free for the one that took it over.
	var gone, present []k8stypes.NamespacedName
	for k := range dirty {
		if _, err := s.services.Services(k.Namespace).Get(k.Name); err != nil {
			gone = append(gone, k)
		} else {
			present = append(present, k)
		}
	}
	byName := func(a, c k8stypes.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, c.Namespace), cmp.Compare(a.Name, c.Name))
	}
	slices.SortFunc(gone, byName)
	slices.SortFunc(present, byName)
	for _, k := range append(gone, present...) {
		b.service(k)
	}
	var lst []agentstatus.ListenerStatus
	var unresolved int
	if listeners {
		lst, unresolved = b.listeners()
		s.forgetAmbiguous()
	}
	for name, c := range map[string]func() *clusterv3.Cluster{
		contract.PassthroughCluster: translate.PassthroughOriginalDst,
		contract.BlackholeCluster:   translate.Blackhole,
	} {
		if b.set.Clusters[name] == nil {
			c := c()
			put(b, b.set.Clusters, c.Name, c)
			b.upd.Clusters[c.Name] = c
		}
	}
	if err := b.validate(); err != nil {
		b.rollback()
		s.m.rejected.Inc()
		s.log.Error("generated configuration is invalid; keeping the last good one", "error", err)
		return err
	}
	pods := s.refusePods
	if listeners {
		pods = lst
	}
	// Refusing before accept: what leaves the pods' sets leaves before the push (its cluster
	// may be filled by it), what enters enters after (its cluster was published empty).
	serviceRange, rangeKnown := s.svcIndex.Range()
	want := refusingInForce(reset, b.published, serviceRange, rangeKnown)
	s.refuser.shrink(want)
	if !b.upd.Empty() {
		if err := s.pub.Apply(b.upd); err != nil {
			b.rollback()
			s.m.rejected.Inc()
			// The proxy kept the last push's clusters: so do the sets.
			s.refuser.reconcile(refusedPods(reset, s.refusePods), refusingInForce(reset, s.published, serviceRange, rangeKnown))
			return err
		}
		s.version++
	}
	s.refusePods = pods
	s.refuser.reconcile(refusedPods(reset, pods), want)
	now := time.Now()
	for _, t := range triggers {
		s.m.programming.Observe(now.Sub(t).Seconds())
	}
	if !b.upd.Empty() {
		s.m.push.Observe(now.Sub(start).Seconds())
	}
	s.saveDemand()
	s.publishStatus(node, nodeAddrs, p1, p2, mode, resetSet, settingsErrs, lst, listeners)
	if unresolved > 0 {
		s.mu.Lock()
		if s.retry == nil {
			s.retry = time.AfterFunc(unresolvedRetry, func() {
				s.mu.Lock()
				s.retry = nil
				s.mu.Unlock()
				s.listenersChanged()
			})
		}
		s.mu.Unlock()
	}
	return nil
}

// refusedPods are the pods that have a refuse table: every captured pod while
// contract.RefusalReset is in force, none otherwise (their tables go).
func refusedPods(reset bool, pods []agentstatus.ListenerStatus) []agentstatus.ListenerStatus {
	if !reset {
		return nil
	}
	return pods
}
