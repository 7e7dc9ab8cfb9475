// Admission: which cluster names the node proxy asked for are published in on-demand mode.
// A name is classified against the Service index as it arrives (intake, on the ADS stream's
// goroutine) and admitted under the cap by the next sync; a refused name waits in the pending
// set (pending.go), bounded, and is admitted once its Service port appears. An index change
// re-checks only the names at the addresses it touched (svcindex ChangesSince).

package agent

import (
	"net/netip"
	"sync"

	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// refusalReasons are every label value of contract.MetricOnDemandRefused, created up front so
// a dashboard sees zeros rather than missing series.
var refusalReasons = []string{contract.ReasonMalformed, contract.ReasonExternal, contract.ReasonNoService,
	contract.ReasonPortNotDeclared, contract.ReasonOverCap, contract.ReasonKubeProxy}

// classReasons names the refusal of a name the index does not call Known.
var classReasons = map[svcindex.Class]string{
	svcindex.External:        contract.ReasonExternal,
	svcindex.NoService:       contract.ReasonNoService,
	svcindex.PortNotDeclared: contract.ReasonPortNotDeclared,
}

// DefaultOnDemandMax bounds the admitted set (--on-demand-max).
const DefaultOnDemandMax = 10000

// demand is the on-demand state. The sync goroutine owns it and changes it under mu; the ADS
// stream's goroutine (ClusterDemand) reads it and files refused names under mu, so a name
// over the bound is answered before the xDS server records it.
type demand struct {
	mu         sync.Mutex
	max        int
	file       string
	admitted   map[string]k8stypes.NamespacedName // name → the Service port's owner
	admittedAt nameIndex                          // admitted names by address
	perSvc     map[k8stypes.NamespacedName]int    // admitted names per Service
	pending    pendingSet
	forgotten  addrSet    // addresses of names refused and not remembered (pending.go)
	reserved   int        // known names queued for admission by the next sync
	refusals   refusalLog // refusals since the last summary line (refusallog.go)
	checked    uint64     // index version the admitted and pending names were last classified at
	changed    bool       // the admitted set differs from the file
}

func newDemand(max int, file string) *demand {
	return &demand{max: max, file: file, admitted: map[string]k8stypes.NamespacedName{}, admittedAt: nameIndex{},
		perSvc: map[k8stypes.NamespacedName]int{}, pending: newPendingSet(contract.OnDemandPendingMax),
		forgotten: newAddrSet(), refusals: refusalLog{}}
}

func (d *demand) admit(name string, addr netip.Addr, svc k8stypes.NamespacedName) {
	d.admitted[name] = svc
	d.admittedAt.add(addr, name)
	d.perSvc[svc]++
	d.changed = true
}

// wants says whether a name of svc's was admitted (demandView).
func (d *demand) wants(svc k8stypes.NamespacedName) bool { return d.perSvc[svc] > 0 }

// admits says whether the cluster name was admitted (demandView).
func (d *demand) admits(name string) bool {
	_, ok := d.admitted[name]
	return ok
}

// drop removes name from the admitted set and returns the Service it belonged to.
func (d *demand) drop(name string) (k8stypes.NamespacedName, bool) {
	svc, ok := d.admitted[name]
	if !ok {
		return svc, false
	}
	delete(d.admitted, name)
	if ap, err := contract.ParseClusterName(name); err == nil {
		d.admittedAt.remove(ap.Addr(), name)
	}
	if d.perSvc[svc]--; d.perSvc[svc] <= 0 {
		delete(d.perSvc, svc)
	}
	d.changed = true
	return svc, true
}

// counts are the sizes /status and the gauges report.
func (d *demand) counts() (demanded, pending, forgotten int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.admitted), d.pending.len(), d.forgotten.len()
}

// classify names why a name cannot be admitted ("" when it is a known Service port).
func (s *syncer) classify(name string) (k8stypes.NamespacedName, string) {
	ap, err := contract.ParseClusterName(name)
	if err != nil {
		return k8stypes.NamespacedName{}, contract.ReasonMalformed
	}
	return s.classifyAddr(ap)
}

func (s *syncer) classifyAddr(ap netip.AddrPort) (k8stypes.NamespacedName, string) {
	r := s.svcIndex.Lookup(ap)
	switch {
	case r.Class != svcindex.Known:
		if reason, ok := classReasons[r.Class]; ok {
			return k8stypes.NamespacedName{}, reason
		}
		return k8stypes.NamespacedName{}, contract.ReasonExternal // a class the index may add later
	case r.Port.Service == contract.APIServerService:
		// Never a svc: cluster (translate.ServicePorts); admitting it would publish nothing.
		return k8stypes.NamespacedName{}, contract.ReasonKubeProxy
	}
	return r.Port.Service, ""
}

// admissible is classify under the cap: a known port that does not fit is over-cap.
func (s *syncer) admissible(name string) (k8stypes.NamespacedName, string) {
	svc, reason := s.classify(name)
	if reason == "" && len(s.demand.admitted) >= s.demand.max {
		reason = contract.ReasonOverCap
	}
	return svc, reason
}

// intake classifies one subscribed name as it arrives; d.mu is held. A known name that fits
// is reserved for the next sync to admit (queue); a refused one is counted and filed in
// pending, or, when pending is full or the name can never be published, forgotten: the
// caller answers the proxy that it does not exist.
func (s *syncer) intake(name string) (queue, forget bool) {
	d := s.demand
	if _, ok := d.admitted[name]; ok || d.pending.has(name) {
		return false, false // resent, e.g. on reconnect
	}
	ap, err := contract.ParseClusterName(name)
	if err != nil {
		s.refuseLocked(name, netip.Addr{}, contract.ReasonMalformed)
		return false, true
	}
	_, reason := s.classifyAddr(ap)
	if reason == "" {
		if len(d.admitted)+d.reserved < d.max {
			d.reserved++
			return true, false
		}
		reason = contract.ReasonOverCap
	}
	return false, !s.refuseLocked(name, ap.Addr(), reason)
}

// refuseLocked counts a refusal and files the name in pending; it reports whether the name is
// remembered. A name that is not (malformed, outside the range, or pending full) is forgotten,
// its address kept when it is in the range. d.mu is held.
func (s *syncer) refuseLocked(name string, addr netip.Addr, reason string) bool {
	d := s.demand
	s.m.odRefused.WithLabelValues(reason).Inc()
	s.log.Debug("on-demand cluster refused", "cluster", name, "reason", reason)
	d.refusals.add(name, reason)
	switch {
	case reason == contract.ReasonMalformed || reason == contract.ReasonExternal:
	case d.pending.add(name, addr):
		return true
	default:
		d.forgotten.add(addr)
	}
	s.m.odForgotten.Inc()
	return false
}

// applyDemand updates the admitted and pending sets from the proxy's requests (ops), the names
// restored from the demand file, and index changes; every Service whose admitted names changed
// is added to dirty so this sync rebuilds it.
func (s *syncer) applyDemand(ops []demandOp, restored []string, dirty map[k8stypes.NamespacedName]struct{}) {
	d := s.demand
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range restored {
		if _, ok := d.admitted[name]; ok {
			continue
		}
		svc, reason := s.admissible(name)
		if reason != "" {
			s.log.Info("dropping a restored on-demand cluster", "cluster", name, "reason", reason)
			continue
		}
		s.admitName(name, svc, dirty)
	}
	if len(restored) > 0 {
		d.changed = len(d.admitted) != len(restored) // rewrite the file only if names were dropped
		s.log.Info("restored on-demand clusters", "file", d.file, "admitted", len(d.admitted), "dropped", len(restored)-len(d.admitted))
	}
	freed := false
	for _, op := range ops {
		if !op.subscribe {
			d.pending.remove(op.name)
			if svc, ok := d.drop(op.name); ok {
				dirty[svc] = struct{}{}
				freed = true
			}
			continue
		}
		d.reserved--
		if _, ok := d.admitted[op.name]; ok {
			continue
		}
		svc, reason := s.admissible(op.name)
		if reason != "" { // the index moved since intake
			ap, _ := contract.ParseClusterName(op.name)
			s.refuseLocked(op.name, ap.Addr(), reason)
			continue
		}
		s.admitName(op.name, svc, dirty)
		s.m.odAdmitted.Inc()
	}
	s.recheck(freed, dirty)
	s.flushRefusals()
}

// admitName admits a known name; d.mu is held.
func (s *syncer) admitName(name string, svc k8stypes.NamespacedName, dirty map[k8stypes.NamespacedName]struct{}) {
	ap, _ := contract.ParseClusterName(name) // known, so it parses
	s.demand.pending.remove(name)
	s.demand.admit(name, ap.Addr(), svc)
	dirty[svc] = struct{}{}
}

// recheck re-classifies what an index change can have changed: the admitted and pending
// names, and the forgotten addresses, at the addresses the index says it touched (all of them
// when the range moved or the index no longer remembers that far back); and, when freed, the
// pending names, some of which may have waited for room. d.mu is held.
func (s *syncer) recheck(freed bool, dirty map[k8stypes.NamespacedName]struct{}) {
	d := s.demand
	c, now, ok := s.svcIndex.ChangesSince(d.checked)
	if now == d.checked && !freed {
		return
	}
	d.checked = now
	if !ok || c.RangeMoved {
		for name := range d.admitted {
			s.recheckAdmitted(name, dirty)
		}
		s.recheckPending(d.pending.names(), dirty)
		for _, a := range d.forgotten.all() {
			s.admitForgotten(a, dirty)
		}
		return
	}
	for _, a := range c.IPs {
		for _, name := range d.admittedAt.names(a) {
			s.recheckAdmitted(name, dirty)
		}
		s.recheckPending(d.pending.byAddr.names(a), dirty)
		if d.forgotten.has(a) {
			s.admitForgotten(a, dirty)
		}
	}
	if freed {
		s.recheckPending(d.pending.names(), dirty)
	}
}

// recheckAdmitted keeps an admitted name whose Service port is still known (owned by whichever
// Service now holds the address) and moves one that is not to pending.
func (s *syncer) recheckAdmitted(name string, dirty map[k8stypes.NamespacedName]struct{}) {
	d := s.demand
	old := d.admitted[name]
	svc, reason := s.classify(name)
	if reason == "" && svc == old {
		return
	}
	d.drop(name)
	dirty[old] = struct{}{}
	if reason == "" { // the VIP changed hands: the name stays admitted, owned by the new Service
		s.admitName(name, svc, dirty)
		return
	}
	// The proxy keeps the name subscribed: admit it again once it is Known again.
	s.log.Info("on-demand cluster no longer a Service port; pending", "cluster", name, "reason", reason)
	ap, _ := contract.ParseClusterName(name)
	if !d.pending.add(name, ap.Addr()) {
		d.forgotten.add(ap.Addr())
		s.m.odForgotten.Inc()
	}
}

// recheckPending admits, oldest first and under the cap, the names that are known now.
func (s *syncer) recheckPending(names []string, dirty map[k8stypes.NamespacedName]struct{}) {
	for _, name := range names {
		if len(s.demand.admitted) >= s.demand.max {
			return
		}
		if svc, reason := s.classify(name); reason == "" {
			s.admitName(name, svc, dirty)
			s.m.odAdmitted.Inc()
			s.log.Info("pending on-demand cluster admitted", "cluster", name, "namespace", svc.Namespace, "service", svc.Name)
		}
	}
}

// admitForgotten admits every known port of the Service now at a forgotten address: the name
// the proxy asked for is among them (pending.go). The address is kept while no Service holds
// it, or while the cap leaves a port out; it is dropped once it leaves the range.
func (s *syncer) admitForgotten(a netip.Addr, dirty map[k8stypes.NamespacedName]struct{}) {
	d := s.demand
	r := s.svcIndex.Lookup(netip.AddrPortFrom(a, 0)) // no Service declares port 0: the owner, if any
	switch r.Class {
	case svcindex.External:
		d.forgotten.remove(a)
		return
	case svcindex.NoService:
		return
	}
	svc, err := s.services.Services(r.Service.Namespace).Get(r.Service.Name)
	if err != nil {
		return // the index is ahead of the lister: the Service's own event re-checks a
	}
	all := true
	for _, p := range svc.Spec.Ports {
		if p.Port <= 0 || p.Port > 65535 {
			continue
		}
		name := contract.ClusterName(a, uint16(p.Port))
		if _, ok := d.admitted[name]; ok {
			continue
		}
		owner, reason := s.admissible(name)
		switch reason {
		case "":
			s.admitName(name, owner, dirty)
			s.m.odAdmitted.Inc()
			s.log.Info("on-demand cluster admitted at a forgotten address", "cluster", name, "namespace", owner.Namespace, "service", owner.Name)
		case contract.ReasonOverCap:
			all = false
		}
	}
	if all {
		d.forgotten.remove(a)
	}
}
