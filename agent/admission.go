// Admission: which cluster names the node proxy asked for are published in on-demand mode.
// A name is classified against the Service index and admitted under the cap; a refused name
// waits in the pending set (pending.go) and is admitted once its Service port appears.

package agent

import (
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

// demand is the on-demand state, owned by the sync goroutine.
type demand struct {
	max      int
	file     string
	admitted map[string]k8stypes.NamespacedName // name → the Service port's owner
	perSvc   map[k8stypes.NamespacedName]int    // admitted names per Service
	pending  pendingSet
	checked  uint64 // index version the admitted and pending names were last classified at
	changed  bool   // the admitted set differs from the file
}

func newDemand(max int, file string) *demand {
	return &demand{max: max, file: file, admitted: map[string]k8stypes.NamespacedName{},
		perSvc: map[k8stypes.NamespacedName]int{}, pending: newPendingSet()}
}

func (d *demand) admit(name string, svc k8stypes.NamespacedName) {
	d.admitted[name] = svc
	d.perSvc[svc]++
	d.changed = true
}

// drop removes name from the admitted set and returns the Service it belonged to.
func (d *demand) drop(name string) (k8stypes.NamespacedName, bool) {
	svc, ok := d.admitted[name]
	if !ok {
		return svc, false
	}
	delete(d.admitted, name)
	if d.perSvc[svc]--; d.perSvc[svc] <= 0 {
		delete(d.perSvc, svc)
	}
	d.changed = true
	return svc, true
}

// classify names why a name cannot be admitted ("" when it is a known Service port).
func (s *syncer) classify(name string) (k8stypes.NamespacedName, string) {
	ap, err := contract.ParseClusterName(name)
	if err != nil {
		return k8stypes.NamespacedName{}, contract.ReasonMalformed
	}
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

// applyDemand updates the admitted and pending sets from the proxy's requests (ops), the names
// restored from the demand file, and index changes; every Service whose admitted names changed
// is added to dirty so this sync rebuilds it.
func (s *syncer) applyDemand(ops []demandOp, restored []string, dirty map[k8stypes.NamespacedName]struct{}) {
	d := s.demand
	for _, name := range restored {
		if _, ok := d.admitted[name]; ok {
			continue
		}
		svc, reason := s.admissible(name)
		if reason != "" {
			s.log.Info("dropping a restored on-demand cluster", "cluster", name, "reason", reason)
			continue
		}
		d.admit(name, svc)
		dirty[svc] = struct{}{}
	}
	if len(restored) > 0 {
		d.changed = len(d.admitted) != len(restored) // rewrite the file only if names were dropped
		s.log.Info("restored on-demand clusters", "file", d.file, "admitted", len(d.admitted), "dropped", len(restored)-len(d.admitted))
	}
	freed := false
	refused := refusalLog{}
	defer refused.flush(s)
	for _, op := range ops {
		if !op.subscribe {
			d.pending.remove(op.name)
			if svc, ok := d.drop(op.name); ok {
				dirty[svc] = struct{}{}
				freed = true
			}
			continue
		}
		if _, ok := d.admitted[op.name]; ok {
			continue // resent, e.g. on reconnect
		}
		svc, reason := s.admissible(op.name)
		if reason != "" {
			s.refuse(op.name, reason)
			refused.add(op.name, reason)
			continue
		}
		d.pending.remove(op.name)
		d.admit(op.name, svc)
		dirty[svc] = struct{}{}
		s.m.odAdmitted.Inc()
	}
	// Reclassify only when an answer can have changed: the index moved, or the cap freed room.
	v := s.svcIndex.Version()
	if v == d.checked && !freed {
		return
	}
	d.checked = v
	for name, old := range d.admitted {
		svc, reason := s.classify(name)
		if reason == "" && svc == old {
			continue
		}
		d.drop(name)
		dirty[old] = struct{}{}
		if reason == "" { // the VIP changed hands: the name stays admitted, owned by the new Service
			d.admit(name, svc)
			dirty[svc] = struct{}{}
			continue
		}
		// The proxy keeps the name subscribed: admit it again once it is Known again.
		s.log.Info("on-demand cluster no longer a Service port; pending", "cluster", name, "reason", reason)
		s.demand.pending.add(name)
	}
	for _, name := range d.pending.names() {
		if len(d.admitted) >= d.max {
			break
		}
		if svc, reason := s.classify(name); reason == "" {
			d.pending.remove(name)
			d.admit(name, svc)
			dirty[svc] = struct{}{}
			s.m.odAdmitted.Inc()
			s.log.Info("pending on-demand cluster admitted", "cluster", name, "namespace", svc.Namespace, "service", svc.Name)
		}
	}
}

func (s *syncer) refuse(name, reason string) {
	s.m.odRefused.WithLabelValues(reason).Inc()
	s.log.Debug("on-demand cluster refused", "cluster", name, "reason", reason)
	if reason != contract.ReasonMalformed { // a malformed name can never become Known
		s.demand.pending.add(name)
	}
}
