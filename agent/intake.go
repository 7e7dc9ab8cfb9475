// Intake: the syncer's inputs. Informer events, settings and the proxy's CDS requests only
// record what changed and wake the loop; sync does the work.

package agent

import (
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// byServiceIndex files EndpointSlices under their Service (sliceIndex).
const byServiceIndex = "service"

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
	svc, ok := unwrap(obj).(*corev1.Service)
	if !ok {
		return
	}
	if contract.IsAPIServerService(svc.Namespace, svc.Name) {
		s.listenersChanged() // its cluster IPs pass through (translate.ListenerOptions.KubeProxyVIPs)
	}
	s.markService(k8stypes.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, time.Time{})
}

func (s *syncer) sliceChanged(obj any) {
	es, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
		return // not owned by a Service: nothing to program
	}
	// The EndpointSlice controller stamps when the change that produced the slice happened;
	// kube-proxy measures network programming latency from it, so do we.
	var t time.Time
	if v := es.Annotations[corev1.EndpointsLastChangeTriggerTime]; v != "" {
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

// setNodeAddrs records the node's own addresses, which every capture listener refuses
// (translate.ListenerOptions.NodeAddrs) and the enrolled pods' captures leave alone.
func (s *syncer) setNodeAddrs(addrs []netip.Addr) {
	s.mu.Lock()
	changed := !slices.Equal(s.nodeAddrs, addrs)
	s.nodeAddrs = addrs
	s.dirtyListeners = s.dirtyListeners || changed
	s.mu.Unlock()
	if s.enroll != nil { // the set the CNI plugin's captures leave alone
		s.enroll.setNodeAddrs(addrs)
	}
	if changed {
		s.log.Info("node addresses", "addresses", addrs)
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

// setRefusal sets contract.KeyRefusal: the next sync installs or deletes the pods' refuse
// tables (nothing is rebuilt: the refused destinations are kept whatever the setting).
func (s *syncer) setRefusal(reset bool) {
	s.mu.Lock()
	changed := s.reset != reset
	s.reset = reset
	s.mu.Unlock()
	if changed {
		s.log.Info("refusal changed", contract.KeyRefusal, refusalName(reset))
		s.signal()
	}
}

// applySettings puts the ConfigMap's settings in effect; errs, its keys whose values are not
// used, go to /status (a sync publishes them even when no setting moved).
func (s *syncer) applySettings(st settings, errs []agentstatus.SettingError) {
	s.setPhases(st.phase1, st.phase2)
	s.setRefusal(st.reset)
	s.setCDSMode(st.cds)
	if s.enroll != nil {
		s.enroll.setSelector(st.selector, st.sel)
	}
	if errs == nil {
		errs = []agentstatus.SettingError{}
	}
	s.mu.Lock()
	changed := !slices.Equal(s.settingsErrs, errs)
	s.settingsErrs = errs
	s.mu.Unlock()
	if changed {
		s.signal()
	}
}

// setCDSMode switches between proactive and on-demand CDS: every Service is rebuilt (clusters
// published or withdrawn) and the listeners gain or lose cap_svc's on_demand.
func (s *syncer) setCDSMode(m agentstatus.CDSMode) {
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

// demandOp is one name of a delta CDS request for the next sync: a known name reserved for
// admission, or a name unsubscribed.
type demandOp struct {
	name      string
	subscribe bool
}

// ClusterDemand implements xdsserver.DemandHandler: it runs on the ADS stream goroutine. Each
// subscribed name is classified at once (intake): a known one is queued for the next sync, a
// refused one is filed in the bounded pending set, and the names that are not kept are
// returned, for the server to answer as not existing. Unsubscribed names are queued.
func (s *syncer) ClusterDemand(subscribe, unsubscribe []string) (forget []string) {
	ops := make([]demandOp, 0, len(unsubscribe))
	d := s.demand
	d.mu.Lock()
	for _, n := range subscribe {
		queue, drop := s.intake(n)
		if queue {
			ops = append(ops, demandOp{name: n, subscribe: true})
		}
		if drop {
			forget = append(forget, n)
		}
	}
	d.mu.Unlock()
	for _, n := range unsubscribe {
		ops = append(ops, demandOp{name: n})
	}
	s.mu.Lock()
	s.demandOps = append(s.demandOps, ops...)
	s.mu.Unlock()
	s.signal()
	return forget
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
