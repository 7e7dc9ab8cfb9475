package agent

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

const (
	zoneLabel = "topology.kubernetes.io/zone"
	// The EndpointSlice controller stamps when the change that produced the slice happened;
	// kube-proxy measures network programming latency from it, so do we.
	triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"
	byServiceIndex        = "service"
	// unresolvedRetry rechecks captured pods whose netns did not show up yet (CNI still running).
	unresolvedRetry = 2 * time.Second
)

// publisher is what the syncer pushes to; *xdsserver.Server satisfies it.
type publisher interface {
	Apply(xdsserver.Update) error
}

// netnsFinder resolves a pod IP to its network namespace file.
type netnsFinder interface {
	Find(netip.Addr) (string, error)
}

// serviceIndex is the part of *svcindex.Index the syncer needs: the range for the listeners,
// Lookup and Version to classify on-demand names.
type serviceIndex interface {
	Range() ([]netip.Prefix, bool)
	Lookup(netip.AddrPort) svcindex.Result
	Version() uint64
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
	rng      serviceIndex
	m        *metrics

	mu             sync.Mutex // guards the pending state below
	dirty          map[k8stypes.NamespacedName]struct{}
	triggers       map[k8stypes.NamespacedName]time.Time
	dirtyAll       bool
	dirtyListeners bool
	node           translate.Node
	phase1, phase2 bool
	mode           CDSMode
	demandOps      []demandOp // the proxy's CDS requests since the last sync, in order
	restored       []string   // names loaded from the demand file, for the first sync
	kick           chan struct{}
	retry          *time.Timer // rechecks unresolved captured pods

	// Owned by the sync goroutine.
	set       translate.Set
	bySvc     map[k8stypes.NamespacedName][]string // cluster names a Service publishes
	owner     map[string]k8stypes.NamespacedName
	endpoints map[k8stypes.NamespacedName]int
	version   uint64
	demand    *demand

	status atomic.Pointer[Status]
}

func newSyncer(log *slog.Logger, pub publisher, services corelisters.ServiceLister, slices cache.Indexer, pods cache.Store,
	netns netnsFinder, rng serviceIndex, m *metrics, node translate.Node, phase1, phase2 bool) *syncer {
	s := &syncer{
		log: log, pub: pub, services: services, slices: slices, pods: pods, netns: netns, rng: rng, m: m,
		dirty: map[k8stypes.NamespacedName]struct{}{}, triggers: map[k8stypes.NamespacedName]time.Time{},
		dirtyAll: true, dirtyListeners: true, node: node, phase1: phase1, phase2: phase2,
		mode: CDSProactive, demand: newDemand(DefaultOnDemandMax, ""),
		kick: make(chan struct{}, 1),
		set: translate.Set{
			Clusters:  map[string]*clusterv3.Cluster{},
			Loads:     map[string]*endpointv3.ClusterLoadAssignment{},
			Listeners: map[string]*listenerv3.Listener{},
		},
		bySvc: map[k8stypes.NamespacedName][]string{}, owner: map[string]k8stypes.NamespacedName{},
		endpoints: map[k8stypes.NamespacedName]int{},
	}
	s.status.Store(&Status{Node: node.Name, Zone: node.Zone, Phase1: phase1, Phase2: phase2, Listeners: []ListenerStatus{}, CDS: CDSProactive})
	return s
}

// configureDemand sets the CDS mode, the admitted-set cap and the demand file; call it before
// the first sync.
func (s *syncer) configureDemand(mode CDSMode, max int, file string) {
	s.mode = mode
	s.demand = newDemand(max, file)
	st := *s.status.Load()
	st.CDS = mode
	s.status.Store(&st)
}

// restoreDemand loads the demand file for the first sync to re-classify. Call it after the
// informer caches synced and before the first sync, so that snapshot already carries them.
func (s *syncer) restoreDemand() {
	if s.demand.file == "" {
		return
	}
	names, err := loadDemandFile(s.demand.file)
	if err != nil {
		s.log.Error("starting with no on-demand clusters", "error", err)
		return
	}
	s.mu.Lock()
	s.restored = names
	s.mu.Unlock()
}

// sliceIndex files an EndpointSlice under the Service it belongs to.
func sliceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + name}, nil
}

func (s *syncer) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *syncer) serviceChanged(obj any) {
	if svc, ok := unwrap(obj).(*corev1.Service); ok {
		s.markService(k8stypes.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, time.Time{})
	}
}

func (s *syncer) sliceChanged(obj any) {
	es, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
		return // not owned by a Service: nothing to program
	}
	var t time.Time
	if v := es.Annotations[triggerTimeAnnotation]; v != "" {
		t, _ = time.Parse(time.RFC3339Nano, v) // a malformed stamp only loses the latency sample
	}
	s.markService(k8stypes.NamespacedName{Namespace: es.Namespace, Name: es.Labels[discoveryv1.LabelServiceName]}, t)
}

func (s *syncer) markService(key k8stypes.NamespacedName, trigger time.Time) {
	s.mu.Lock()
	s.dirty[key] = struct{}{}
	if !trigger.IsZero() {
		if old, ok := s.triggers[key]; !ok || trigger.Before(old) {
			s.triggers[key] = trigger
		}
	}
	s.mu.Unlock()
	s.signal()
}

func (s *syncer) listenersChanged() {
	s.mu.Lock()
	s.dirtyListeners = true
	s.mu.Unlock()
	s.signal()
}

func (s *syncer) setNode(n translate.Node) {
	s.mu.Lock()
	changed := s.node != n
	s.node = n
	s.dirtyAll = s.dirtyAll || changed
	s.mu.Unlock()
	if changed {
		s.log.Info("node zone", "node", n.Name, "zone", n.Zone)
		s.signal()
	}
}

func (s *syncer) setPhases(p1, p2 bool) {
	s.mu.Lock()
	changed := s.phase1 != p1 || s.phase2 != p2
	s.dirtyAll = s.dirtyAll || s.phase1 != p1
	s.dirtyListeners = s.dirtyListeners || changed
	s.phase1, s.phase2 = p1, p2
	s.mu.Unlock()
	if changed {
		s.log.Info("phases changed", "phase1", p1, "phase2", p2)
		s.signal()
	}
}

// setCDSMode switches between proactive and on-demand CDS: every Service is rebuilt (clusters
// published or withdrawn) and the listeners gain or lose cap_svc's on_demand.
func (s *syncer) setCDSMode(m CDSMode) {
	s.mu.Lock()
	changed := s.mode != m
	s.mode = m
	s.dirtyAll = s.dirtyAll || changed
	s.dirtyListeners = s.dirtyListeners || changed
	s.mu.Unlock()
	if changed {
		s.log.Info("CDS mode changed", "cds", m)
		s.signal()
	}
}

// sync rebuilds what is dirty and publishes the change. A change that fails validation is
// not published: the last good resources stay with the proxy, and the error is returned.
func (s *syncer) sync() error {
	s.mu.Lock()
	dirty, triggers, all, listeners := s.dirty, s.triggers, s.dirtyAll, s.dirtyListeners
	node, p1, p2, mode := s.node, s.phase1, s.phase2, s.mode
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
	b := s.newBatch()
	b.full = all
	b.onDemand = mode == CDSOnDemand
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
		b.service(k, node, p1)
	}
	var lst []ListenerStatus
	var unresolved int
	if listeners {
		lst, unresolved = b.listeners(node, p1, p2, b.onDemand)
	}
	if b.set.Clusters[contract.PassthroughCluster] == nil {
		c := translate.PassthroughOriginalDst()
		put(b, b.set.Clusters, c.Name, c)
		b.upd.Clusters[c.Name] = c
	}
	if err := b.validate(); err != nil {
		b.rollback()
		s.m.rejected.Inc()
		s.log.Error("generated configuration is invalid; keeping the last good one", "error", err)
		return err
	}
	if !b.upd.Empty() {
		if err := s.pub.Apply(b.upd); err != nil {
			b.rollback()
			s.m.rejected.Inc()
			return err
		}
		s.version++
	}
	now := time.Now()
	for _, t := range triggers {
		s.m.programming.Observe(now.Sub(t).Seconds())
	}
	if !b.upd.Empty() {
		s.m.push.Observe(now.Sub(start).Seconds())
	}
	s.saveDemand()
	s.publishStatus(node, p1, p2, mode, lst, listeners)
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

// batch is one sync's change, made in place on the published maps with an undo log: a
// result that fails validation is rolled back, so only a valid set is ever adopted. (Cloning
// the maps instead costs more than the rebuild of one Service at 10k Services.)
type batch struct {
	s         *syncer
	set       translate.Set
	bySvc     map[k8stypes.NamespacedName][]string
	owner     map[string]k8stypes.NamespacedName
	endpoints map[k8stypes.NamespacedName]int
	upd       xdsserver.Update
	undo      []func()
	full      bool // everything was rebuilt: check every reference
	onDemand  bool // publish only admitted svc: clusters
}

func (s *syncer) newBatch() *batch {
	return &batch{
		s: s, set: s.set, bySvc: s.bySvc, owner: s.owner, endpoints: s.endpoints,
		upd: xdsserver.Update{Clusters: map[string]types.Resource{}, Loads: map[string]types.Resource{}, Listeners: map[string]types.Resource{}},
	}
}

func (b *batch) rollback() {
	for i := len(b.undo) - 1; i >= 0; i-- {
		b.undo[i]()
	}
	b.undo = nil
}

func put[K comparable, V any](b *batch, m map[K]V, k K, v V) {
	old, had := m[k]
	b.undo = append(b.undo, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
	m[k] = v
}

func del[K comparable, V any](b *batch, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	b.undo = append(b.undo, func() { m[k] = old })
	delete(m, k)
}

func (b *batch) service(key k8stypes.NamespacedName, node translate.Node, phase1 bool) {
	var (
		cs []*clusterv3.Cluster
		ls []*endpointv3.ClusterLoadAssignment
		n  int
	)
	// On demand, a Service none of whose ports was asked for costs no translation.
	wanted := !b.onDemand || b.s.demand.perSvc[key] > 0
	if svc, err := b.s.services.Services(key.Namespace).Get(key.Name); err == nil && phase1 && wanted {
		objs, _ := b.s.slices.ByIndex(byServiceIndex, key.String())
		eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			eps = append(eps, o.(*discoveryv1.EndpointSlice))
		}
		// A slice that arrives before its Service waits in the informer cache: nothing is
		// built until the Service exists, then its event rebuilds from every slice.
		cs, ls, n = translate.Service(svc, eps, node)
	}
	names := make([]string, 0, len(cs))
	for i, c := range cs {
		if _, ok := b.s.demand.admitted[c.Name]; b.onDemand && !ok {
			continue
		}
		if o, ok := b.owner[c.Name]; ok && o != key {
			b.s.log.Warn("two Services claim one cluster IP and port; keeping the first", "cluster", c.Name, "kept", o, "skipped", key)
			continue
		}
		names = append(names, c.Name)
		put(b, b.owner, c.Name, key)
		if !proto.Equal(b.set.Clusters[c.Name], c) {
			put(b, b.set.Clusters, c.Name, c)
			b.upd.Clusters[c.Name] = c
		}
		if !proto.Equal(b.set.Loads[c.Name], ls[i]) {
			put(b, b.set.Loads, c.Name, ls[i])
			b.upd.Loads[c.Name] = ls[i]
		}
	}
	for _, old := range b.bySvc[key] {
		if !slices.Contains(names, old) {
			del(b, b.set.Clusters, old)
			del(b, b.set.Loads, old)
			del(b, b.owner, old)
			b.upd.DeleteClusters = append(b.upd.DeleteClusters, old)
			b.upd.DeleteLoads = append(b.upd.DeleteLoads, old)
		}
	}
	if len(names) == 0 {
		del(b, b.bySvc, key)
		del(b, b.endpoints, key)
	} else {
		put(b, b.bySvc, key, names)
		put(b, b.endpoints, key, n)
	}
}

func (b *batch) listeners(node translate.Node, p1, p2, onDemand bool) ([]ListenerStatus, int) {
	prefixes, known := b.s.rng.Range()
	opts := translate.ListenerOptions{Range: prefixes, RangeKnown: known, Phase1: p1, Phase2: p2, OnDemand: onDemand}
	want := map[string]*listenerv3.Listener{}
	var st []ListenerStatus
	unresolved := 0
	for _, o := range b.s.pods.List() {
		pod, ok := o.(*corev1.Pod)
		if !ok || !captured(pod, node.Name) {
			continue
		}
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || !ip.Is4() {
			continue // no IP yet: the pod's update brings it
		}
		path, err := b.s.netns.Find(ip)
		if err != nil {
			unresolved++
			b.s.log.Debug("captured pod's network namespace not found yet", "pod", pod.Namespace+"/"+pod.Name, "ip", ip, "error", err)
			continue
		}
		l := translate.CaptureListener(translate.CapturedPod{Namespace: pod.Namespace, Name: pod.Name, NetnsPath: path}, opts)
		want[l.Name] = l
		st = append(st, ListenerStatus{Pod: pod.Name, Namespace: pod.Namespace, Netns: path, Name: l.Name})
	}
	for name, l := range want {
		if !proto.Equal(b.set.Listeners[name], l) {
			put(b, b.set.Listeners, name, l)
			b.upd.Listeners[name] = l
		}
	}
	for name := range b.set.Listeners {
		if want[name] == nil {
			del(b, b.set.Listeners, name)
			b.upd.DeleteListeners = append(b.upd.DeleteListeners, name)
		}
	}
	slices.SortFunc(st, func(a, c ListenerStatus) int { return cmp.Compare(a.Name, c.Name) })
	return st, unresolved
}

func captured(pod *corev1.Pod, node string) bool {
	return pod.Labels[contract.CapturedLabel] == "true" && pod.Spec.NodeName == node && !pod.Spec.HostNetwork &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// validate runs ValidateAll on every changed resource and the cross-reference check on the
// whole candidate set.
func (b *batch) validate() error {
	for name, r := range b.upd.Clusters {
		if err := translate.Validate(r.(*clusterv3.Cluster)); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	for name, r := range b.upd.Loads {
		if err := translate.Validate(r.(*endpointv3.ClusterLoadAssignment)); err != nil {
			return fmt.Errorf("load assignment %s: %w", name, err)
		}
	}
	for name, r := range b.upd.Listeners {
		if err := translate.Validate(r.(*listenerv3.Listener)); err != nil {
			return fmt.Errorf("listener %s: %w", name, err)
		}
	}
	if b.full {
		return translate.CheckReferences(b.set)
	}
	clusters := slices.AppendSeq(slices.Clone(b.upd.DeleteClusters), maps.Keys(b.upd.Clusters))
	loads := slices.AppendSeq(slices.Clone(b.upd.DeleteLoads), maps.Keys(b.upd.Loads))
	return translate.CheckChanged(b.set, clusters, loads)
}

func (s *syncer) publishStatus(node translate.Node, p1, p2 bool, mode CDSMode, lst []ListenerStatus, listenersBuilt bool) {
	old := s.status.Load()
	st := &Status{Node: node.Name, Zone: node.Zone, Phase1: p1, Phase2: p2, SnapshotVersion: s.version, Listeners: old.Listeners, Range: []string{},
		CDS: mode, Demanded: len(s.demand.admitted), Pending: s.demand.pending.len()}
	if listenersBuilt {
		st.Listeners = lst
		if st.Listeners == nil {
			st.Listeners = []ListenerStatus{}
		}
	}
	for _, n := range s.endpoints {
		st.Endpoints += n
	}
	st.Clusters = len(s.set.Clusters)
	prefixes, known := s.rng.Range()
	st.RangeKnown = known
	for _, p := range prefixes {
		st.Range = append(st.Range, p.String())
	}
	s.status.Store(st)
	s.m.version.Set(float64(s.version))
	s.m.clusters.Set(float64(st.Clusters))
	s.m.endpoints.Set(float64(st.Endpoints))
	s.m.listeners.Set(float64(len(s.set.Listeners)))
	s.m.resources.Set(float64(len(s.set.Clusters) + len(s.set.Loads) + len(s.set.Listeners)))
	s.m.odDemanded.Set(float64(st.Demanded))
	s.m.odPending.Set(float64(st.Pending))
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
