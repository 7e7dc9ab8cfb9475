package svcindex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Index classifies destinations; see the package documentation. Build it with
// New, then call Run.
type Index struct {
	log      *slog.Logger
	factory  informers.SharedInformerFactory
	override []netip.Prefix // IPv4, masked; nil = use ServiceCIDRs
	// Handler registrations, not informers: an informer has synced when its
	// store is filled, a registration when its handler has seen every item.
	services cache.ResourceEventHandlerRegistration
	cidrs    cache.ResourceEventHandlerRegistration // nil with an override
	imports  *importWatcher

	mu      sync.RWMutex
	byIP    map[uint32]*svcEntry // ClusterIP → claimant that answers, head of a name-ordered chain
	byName  map[types.NamespacedName]*svcEntry
	cidrSet map[string][]netip.Prefix             // ServiceCIDR name → its IPv4 CIDRs
	imps    map[types.NamespacedName][]netip.Addr // ServiceImport → its IPv4 ClusterSetIPs
	spans   []span                                // the merged range; nil when unknown
	known   bool

	version atomic.Uint64
	chMu    sync.Mutex
	ch      chan struct{}
	changes changeLog // what each recent bump changed (ChangesSince); under mu
}

// svcEntry is the indexed part of one Service. Only ports and name are read by
// lookups; next is changed under the write lock only.
type svcEntry struct {
	name  types.NamespacedName
	ip    uint32
	ports []portEntry // TCP only, sorted by port, unique
	next  *svcEntry   // next claimant of the same ClusterIP, by name order
}

type portEntry struct {
	port   uint16
	name   string
	target intstr.IntOrString
}

// New registers Service and (without an override) ServiceCIDR informers on
// factory. dyn and disco may be nil: then ServiceImports are not consulted.
func New(factory informers.SharedInformerFactory, dyn dynamic.Interface, disco discovery.DiscoveryInterface, opts Options) (*Index, error) {
	if factory == nil {
		return nil, errors.New("svcindex: nil informer factory")
	}
	x, err := newIndex(opts)
	if err != nil {
		return nil, err
	}
	x.factory = factory
	x.services, err = factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { x.setService(o) },
		UpdateFunc: func(_, o any) { x.setService(o) },
		DeleteFunc: func(o any) { x.deleteService(o) },
	})
	if err != nil {
		return nil, fmt.Errorf("svcindex: watching Services: %w", err)
	}
	if x.override == nil {
		x.cidrs, err = factory.Networking().V1().ServiceCIDRs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { x.setServiceCIDR(o) },
			UpdateFunc: func(_, o any) { x.setServiceCIDR(o) },
			DeleteFunc: func(o any) { x.deleteServiceCIDR(o) },
		})
		if err != nil {
			return nil, fmt.Errorf("svcindex: watching ServiceCIDRs: %w", err)
		}
	}
	x.imports = newImportWatcher(x, dyn, disco)
	return x, nil
}

// newIndex returns an Index with no informers: the state and its rules only.
func newIndex(opts Options) (*Index, error) {
	x := &Index{
		log:     opts.Logger,
		byIP:    make(map[uint32]*svcEntry),
		byName:  make(map[types.NamespacedName]*svcEntry),
		cidrSet: make(map[string][]netip.Prefix),
		imps:    make(map[types.NamespacedName][]netip.Addr),
		ch:      make(chan struct{}),
	}
	if x.log == nil {
		x.log = slog.Default()
	}
	x.log = x.log.With("component", "svcindex")
	for _, p := range opts.RangeOverride {
		if !p.IsValid() {
			return nil, fmt.Errorf("svcindex: range override: invalid prefix %q", p)
		}
		if !p.Addr().Is4() {
			x.log.Info("ignoring non-IPv4 range override prefix", "prefix", p)
			continue
		}
		x.override = append(x.override, p.Masked())
	}
	if len(opts.RangeOverride) > 0 && len(x.override) == 0 {
		return nil, fmt.Errorf("svcindex: range override %v has no IPv4 prefix", opts.RangeOverride)
	}
	if x.override != nil {
		x.mu.Lock()
		x.recomputeRangeLocked()
		x.mu.Unlock()
	}
	x.imports = newImportWatcher(x, nil, nil)
	return x, nil
}

// Run starts the informers the factory has not started yet and the
// ServiceImport watcher, and returns nil when ctx ends.
func (x *Index) Run(ctx context.Context) error {
	x.factory.Start(ctx.Done())
	x.imports.run(ctx)
	return nil
}

// HasSynced reports whether the first full list of every watched kind has
// been applied (and whether the ServiceImport CRD was asked about once).
func (x *Index) HasSynced() bool {
	if !x.services.HasSynced() || (x.cidrs != nil && !x.cidrs.HasSynced()) {
		return false
	}
	return x.imports.hasSynced()
}

// Lookup classifies an IPv4 TCP destination. It takes the read lock and does
// not allocate.
func (x *Index) Lookup(dst netip.AddrPort) Result {
	a := dst.Addr().Unmap()
	if !a.Is4() {
		return Result{}
	}
	ip := v4(a)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if !contains(x.spans, ip) {
		return Result{}
	}
	e := x.byIP[ip]
	if e == nil {
		return Result{Class: NoService}
	}
	p := dst.Port()
	for i := range e.ports {
		if e.ports[i].port == p {
			return Result{Class: Known, Service: e.name, Port: e.servicePort(a, i)}
		}
	}
	return Result{Class: PortNotDeclared, Service: e.name}
}

func (e *svcEntry) servicePort(a netip.Addr, i int) ServicePort {
	pe := &e.ports[i]
	return ServicePort{Service: e.name, ClusterIP: a, Port: pe.port, PortName: pe.name, TargetPort: pe.target}
}

// Range returns the Service range as sorted, merged, normalised IPv4
// prefixes. known is false when there is neither a ServiceCIDR with an IPv4
// CIDR nor an override; ServiceImport /32s alone do not make it known.
func (x *Index) Range() (prefixes []netip.Prefix, known bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return prefixesOf(x.spans), x.known
}

// Version increases on every change that can alter a Lookup, Range or
// ServicePorts answer.
func (x *Index) Version() uint64 { return x.version.Load() }

// Changed returns a channel that is closed at the next Version bump. Select on
// it, then call Changed again for the next one.
func (x *Index) Changed() <-chan struct{} {
	x.chMu.Lock()
	defer x.chMu.Unlock()
	return x.ch
}

// ServicePorts returns every port Lookup answers Known for, sorted by
// namespace, name and port. The slice is the caller's.
func (x *Index) ServicePorts() []ServicePort {
	x.mu.RLock()
	var out []ServicePort
	for ip, e := range x.byIP {
		if !contains(x.spans, ip) {
			continue
		}
		a := addrOf(ip)
		for i := range e.ports {
			out = append(out, e.servicePort(a, i))
		}
	}
	x.mu.RUnlock()
	slices.SortFunc(out, func(a, b ServicePort) int {
		if c := compareNames(a.Service, b.Service); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return out
}

// bumpLocked publishes a change that touched the ClusterIPs ips (none: the
// range moved). Called with mu held for writing, so versions and channel
// closes happen in the order of the changes.
func (x *Index) bumpLocked(ips ...uint32) {
	x.changes.record(x.version.Load()+1, ips)
	x.version.Add(1)
	x.chMu.Lock()
	close(x.ch)
	x.ch = make(chan struct{})
	x.chMu.Unlock()
}

func compareNames(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// --- Services ---

// entryFor returns the indexed form of svc, or nil when it is not indexed.
func entryFor(svc *corev1.Service) *svcEntry {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 {
		ips = []string{svc.Spec.ClusterIP}
	}
	var ip netip.Addr
	for _, s := range ips {
		// "None" (headless) and "" (not allocated yet) fail to parse.
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			ip = a
			break
		}
	}
	if !ip.IsValid() {
		return nil
	}
	e := &svcEntry{name: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, ip: v4(ip)}
	for _, p := range svc.Spec.Ports {
		if (p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) || p.Port <= 0 || p.Port > 65535 {
			continue
		}
		t := p.TargetPort
		if t.Type == intstr.Int && t.IntVal == 0 {
			t = intstr.FromInt32(p.Port) // the apiserver's default
		}
		e.ports = append(e.ports, portEntry{port: uint16(p.Port), name: p.Name, target: t})
	}
	// The apiserver rejects duplicate port/protocol pairs; keep the first anyway.
	slices.SortStableFunc(e.ports, func(a, b portEntry) int { return int(a.port) - int(b.port) })
	e.ports = slices.CompactFunc(e.ports, func(a, b portEntry) bool { return a.port == b.port })
	e.ports = slices.Clip(e.ports)
	return e
}

func (e *svcEntry) sameAs(o *svcEntry) bool {
	return e.name == o.name && e.ip == o.ip && slices.Equal(e.ports, o.ports)
}

func (x *Index) setService(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		x.log.Debug("ignoring unexpected object in Service handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	x.putService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, entryFor(svc))
}

func (x *Index) deleteService(obj any) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	x.putService(key, nil)
}

// putService replaces what key contributes to the index with e (nil: nothing).
func (x *Index) putService(key types.NamespacedName, e *svcEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.byName[key]
	if old == nil && e == nil {
		return
	}
	if old != nil && e != nil && old.sameAs(e) {
		return
	}
	if old != nil {
		x.unclaimLocked(old)
		delete(x.byName, key)
	}
	if e != nil {
		x.claimLocked(e)
		x.byName[key] = e
	}
	var ips []uint32
	if old != nil {
		ips = append(ips, old.ip)
	}
	if e != nil && (old == nil || e.ip != old.ip) {
		ips = append(ips, e.ip)
	}
	x.bumpLocked(ips...)
}

// claimLocked links e into the chain of its ClusterIP, keeping name order so
// the answering claimant does not depend on event order.
func (x *Index) claimLocked(e *svcEntry) {
	head := x.byIP[e.ip]
	if head == nil || compareNames(e.name, head.name) < 0 {
		e.next = head
		x.byIP[e.ip] = e
		return
	}
	p := head
	for p.next != nil && compareNames(p.next.name, e.name) < 0 {
		p = p.next
	}
	e.next = p.next
	p.next = e
}

func (x *Index) unclaimLocked(e *svcEntry) {
	head := x.byIP[e.ip]
	if head == e {
		if e.next == nil {
			delete(x.byIP, e.ip)
		} else {
			x.byIP[e.ip] = e.next
		}
		e.next = nil
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == e {
			p.next = e.next
			e.next = nil
			return
		}
	}
}

// keyOf names a deleted object, tombstones included.
func keyOf(obj any) (types.NamespacedName, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		ns, name, err := cache.SplitMetaNamespaceKey(t.Key)
		if err != nil {
			return types.NamespacedName{}, false
		}
		return types.NamespacedName{Namespace: ns, Name: name}, true
	}
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

// --- ServiceCIDRs and the range ---

func (x *Index) setServiceCIDR(obj any) {
	sc, ok := obj.(*networkingv1.ServiceCIDR)
	if !ok {
		return
	}
	var ps []netip.Prefix
	for _, s := range sc.Spec.CIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			x.log.Debug("ignoring unparsable ServiceCIDR entry", "servicecidr", sc.Name, "cidr", s, "err", err)
			continue
		}
		if p.Addr().Is4() {
			ps = append(ps, p.Masked())
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if ps == nil {
		delete(x.cidrSet, sc.Name)
	} else {
		x.cidrSet[sc.Name] = ps
	}
	x.recomputeRangeLocked()
}

func (x *Index) deleteServiceCIDR(obj any) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.cidrSet, key.Name)
	x.recomputeRangeLocked()
}

// recomputeRangeLocked rebuilds the merged range and publishes it when it
// changed. ServiceCIDRs are few, so rebuilding beats incremental bookkeeping.
func (x *Index) recomputeRangeLocked() {
	var sp []span
	known := false
	if x.override != nil {
		known = true
		for _, p := range x.override {
			sp = append(sp, spanOf(p))
		}
	} else {
		for _, ps := range x.cidrSet {
			known = true
			for _, p := range ps {
				sp = append(sp, spanOf(p))
			}
		}
	}
	if known {
		for _, as := range x.imps {
			for _, a := range as {
				sp = append(sp, span{v4(a), v4(a)})
			}
		}
	}
	sp = mergeSpans(sp)
	if known == x.known && slices.Equal(sp, x.spans) {
		return
	}
	x.spans, x.known = sp, known
	x.log.Info("Service range changed", "known", known, "prefixes", prefixesOf(sp))
	x.bumpLocked()
}
