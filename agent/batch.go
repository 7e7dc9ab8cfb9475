// The batch: one sync's change, built in place on the published resources with an undo log.

package agent

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
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

	"github.com/aether-mesh/svclb/agent/internal/netnsfind"
	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// batchInput is everything one sync's batch reads besides the resources it changes: the
// informers' listers, the Service index, the on-demand view, the node and the phases. The
// syncer builds one per sync (syncer.input), with the node and phases it took under its lock;
// the batch reaches into nothing else.
type batchInput struct {
	log      *slog.Logger
	services corelisters.ServiceLister
	slices   cache.Indexer // EndpointSlices, indexed byServiceIndex
	pods     cache.Store   // captured pods on this node
	netns    netnsFinder
	// enrolled are the CNI-enrolled pods' capture listeners (enrollment.capturedPods).
	enrolled func() []translate.CapturedPod
	index    serviceIndex // the listeners' Service range
	demand   demandView   // read on demand only: which Services and names were admitted
	// unresolved says why a captured pod has no listener (syncer.unresolved, rate-limited).
	unresolved func(*corev1.Pod, netip.Addr, error)

	node      translate.Node
	nodeAddrs []netip.Addr // the node's own IPv4 addresses, refused by every listener
	phase1    bool
	phase2    bool
	onDemand  bool // publish only admitted svc: clusters
	full      bool // everything is rebuilt: check every reference
}

// demandView is what a batch reads of the on-demand state; *demand satisfies it. The sync
// goroutine is its only writer.
type demandView interface {
	// wants says whether a name of the Service's was admitted.
	wants(k8stypes.NamespacedName) bool
	// admits says whether the cluster name was admitted.
	admits(name string) bool
}

// published are the resources the syncer last published and what they are indexed by; a
// batch changes them in place (the sync goroutine owns them).
type published struct {
	set       translate.Set
	bySvc     map[k8stypes.NamespacedName][]string // cluster names a Service publishes
	owner     map[string]k8stypes.NamespacedName
	endpoints map[k8stypes.NamespacedName]int
	// refused are the published svc: clusters with no endpoint for the node, by VIP:port
	// (what the refuse tables hold while contract.RefusalReset is in force: refuser.go).
	refused refused
	// served are the VIP:ports each Service declares (spec.ports[].port) and the agent serves,
	// published or not (on demand, a port nobody asked for is still declared): a SYN to one of
	// their VIPs on another port is refused as port-not-declared (refuser.go).
	served map[k8stypes.NamespacedName][]netip.AddrPort
}

// batch is one sync's change, made in place on the published maps with an undo log: a
// result that fails validation is rolled back, so only a valid set is ever adopted. (Cloning
// the maps instead costs more than the rebuild of one Service at 10k Services.)
type batch struct {
	in batchInput
	published
	upd  xdsserver.Update
	undo []func()
}

func newBatch(in batchInput, p published) *batch {
	return &batch{
		in: in, published: p,
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

func (b *batch) service(key k8stypes.NamespacedName) {
	var (
		cs []*clusterv3.Cluster
		ls []*endpointv3.ClusterLoadAssignment
		n  int
	)
	// On demand, a Service none of whose ports was asked for costs no translation.
	wanted := !b.in.onDemand || b.in.demand.wants(key)
	svc, err := b.in.services.Services(key.Namespace).Get(key.Name)
	var served []netip.AddrPort
	if err == nil && b.in.phase1 {
		for _, p := range translate.ServicePorts(svc) {
			served = append(served, netip.AddrPortFrom(p.VIP, p.Port))
		}
	}
	if len(served) == 0 {
		del(b, b.served, key)
	} else if !slices.Equal(b.served[key], served) {
		put(b, b.served, key, served)
	}
	if err == nil && b.in.phase1 && wanted {
		objs, _ := b.in.slices.ByIndex(byServiceIndex, key.String())
		eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			eps = append(eps, o.(*discoveryv1.EndpointSlice))
		}
		// A slice that arrives before its Service waits in the informer cache: nothing is
		// built until the Service exists, then its event rebuilds from every slice.
		cs, ls, n = translate.Service(svc, eps, b.in.node)
	}
	names := make([]string, 0, len(cs))
	for i, c := range cs {
		if b.in.onDemand && !b.in.demand.admits(c.Name) {
			continue
		}
		if o, ok := b.owner[c.Name]; ok && o != key {
			b.in.log.Warn("two Services claim one cluster IP and port; keeping the first", "cluster", c.Name, "kept", o, "skipped", key)
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
		if ap, err := contract.ParseClusterName(c.Name); err == nil {
			if len(ls[i].GetEndpoints()) == 0 {
				put(b, b.refused, ap, key)
			} else {
				del(b, b.refused, ap)
			}
		}
	}
	for _, old := range b.bySvc[key] {
		if !slices.Contains(names, old) {
			if ap, err := contract.ParseClusterName(old); err == nil {
				del(b, b.refused, ap)
			}
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

// listeners rebuilds every capture listener; it returns their /status entries and how many
// captured pods have no netns yet.
func (b *batch) listeners() ([]agentstatus.ListenerStatus, int) {
	in := b.in
	prefixes, known := in.index.Range()
	opts := translate.ListenerOptions{Range: prefixes, RangeKnown: known, Phase1: in.phase1, Phase2: in.phase2, OnDemand: in.onDemand, NodeAddrs: in.nodeAddrs}
	if api, err := in.services.Services(contract.APIServerNamespace).Get(contract.APIServerName); err == nil {
		opts.KubeProxyVIPs = translate.KubeProxyVIPs(api)
	}
	want := map[string]*listenerv3.Listener{}
	var st []agentstatus.ListenerStatus
	unresolved := 0
	defer in.netns.Snapshot()() // one read of the namespaces for all the pods
	for _, o := range in.pods.List() {
		pod, ok := o.(*corev1.Pod)
		if !ok || !captured(pod, in.node.Name) {
			continue
		}
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || !ip.Is4() {
			continue // no IP yet: the pod's update brings it
		}
		path, err := in.netns.Find(ip)
		if err != nil {
			// Retried like a netns not there yet: the second holder may drop the address
			// without any Kubernetes event.
			unresolved++
			in.unresolved(pod, ip, err)
			continue
		}
		l := translate.CaptureListener(translate.CapturedPod{Namespace: pod.Namespace, Name: pod.Name, NetnsPath: path}, opts)
		want[l.Name] = l
		st = append(st, agentstatus.ListenerStatus{Pod: pod.Name, Namespace: pod.Namespace, Netns: path, Name: l.Name})
	}
	for _, p := range in.enrolled() {
		l := translate.CaptureListener(p, opts)
		if want[l.Name] != nil {
			continue // also meshed by the init container: one listener
		}
		want[l.Name] = l
		st = append(st, agentstatus.ListenerStatus{Pod: p.Name, Namespace: p.Namespace, Netns: p.NetnsPath, Name: l.Name})
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
	slices.SortFunc(st, func(a, c agentstatus.ListenerStatus) int { return cmp.Compare(a.Name, c.Name) })
	return st, unresolved
}

// ambiguousWarnEvery spaces the warnings about one pod whose IP another namespace also holds:
// the holder of the copy can add and drop it at will, and each ambiguous rebuild is retried.
const ambiguousWarnEvery = 10 * time.Minute

// unresolved logs why a captured pod has no listener: a netns not there yet at debug level (the
// CNI may still be running); a second namespace holding its IP as a warning naming both files,
// at most once per pod per ambiguousWarnEvery (debug in between).
func (s *syncer) unresolved(pod *corev1.Pod, ip netip.Addr, err error) {
	key := k8stypes.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	var amb *netnsfind.AmbiguousError
	if !errors.As(err, &amb) {
		s.log.Debug("captured pod's network namespace not found yet", "pod", key.String(), "ip", ip, "error", err)
		return
	}
	now := s.clock.Now()
	if t, ok := s.ambiguousSaid[key]; ok && now.Sub(t) < ambiguousWarnEvery {
		s.log.Debug("captured pod's IP is held by more than one network namespace", "pod", key.String(), "ip", ip, "netns", amb.Paths)
		return
	}
	if s.ambiguousSaid == nil {
		s.ambiguousSaid = map[k8stypes.NamespacedName]time.Time{}
	}
	s.ambiguousSaid[key] = now
	s.log.Warn("captured pod's IP is held by more than one network namespace; not binding its listener by IP until one remains",
		"pod", key.String(), "ip", ip, "netns", amb.Paths)
}

// forgetAmbiguous drops the warnings older than ambiguousWarnEvery, after each rebuild of the
// listeners: a pod warned about long ago is warned about again.
func (s *syncer) forgetAmbiguous() {
	now := s.clock.Now()
	for k, t := range s.ambiguousSaid {
		if now.Sub(t) >= ambiguousWarnEvery {
			delete(s.ambiguousSaid, k)
		}
	}
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
	if b.in.full {
		return translate.CheckReferences(b.set)
	}
	clusters := slices.AppendSeq(slices.Clone(b.upd.DeleteClusters), maps.Keys(b.upd.Clusters))
	loads := slices.AppendSeq(slices.Clone(b.upd.DeleteLoads), maps.Keys(b.upd.Loads))
	return translate.CheckChanged(b.set, clusters, loads)
}
