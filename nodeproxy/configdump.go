package nodeproxy

// What the admin API shows of the applied configuration, in Envoy's own
// shapes (api/envoy/admin/v3: config_dump.proto, config_dump_shared.proto,
// listeners.proto), so a client of Envoy's admin reads this proxy unchanged.
// Envoy builds them in source/server/admin/config_dump_handler.cc
// (ConfigDumpHandler::addAllConfigToDump, with each manager's callback) and
// source/server/admin/listeners_handler.cc (ListenersHandler::handlerListenerInfo).

import (
	"sort"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	clusterType  = resourcev3.ClusterType
	endpointType = resourcev3.EndpointType
	listenerType = resourcev3.ListenerType
)

// applied is one resource as it was received: the message, its version and
// when it was applied (version_info and last_updated in a config dump).
type applied struct {
	msg     proto.Message
	version string
	updated time.Time
}

// setVersions records the versions of a response about to be applied.
func (p *Proxy) setVersions(typeURL string, res []*discoveryv3.Resource) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := make(map[string]string, len(res))
	for _, r := range res {
		v[r.GetName()] = r.GetVersion()
	}
	p.versions[typeURL] = v
}

// appliedLocked stamps a resource being applied now; p.mu is held.
func (p *Proxy) appliedLocked(typeURL, name string, m proto.Message) applied {
	return applied{msg: m, version: p.versions[typeURL][name], updated: p.now()}
}

// newest is the version of the most recently applied of a type's resources:
// a delta stream has no version for the whole set, so the dump's top-level
// version_info names the last one applied.
func newest(as []applied) string {
	var last applied
	for _, a := range as {
		if a.updated.After(last.updated) {
			last = a
		}
	}
	return last.version
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err) // only generated messages reach here
	}
	return a
}

// ConfigDump is /config_dump: the clusters, then the listeners, then (with
// includeEDS, Envoy's ?include_eds) the endpoints.
func (p *Proxy) ConfigDump(includeEDS bool) *adminv3.ConfigDump {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &adminv3.ConfigDump{Configs: []*anypb.Any{mustAny(p.clustersDumpLocked()), mustAny(p.listenersDumpLocked())}}
	if includeEDS {
		d.Configs = append(d.Configs, mustAny(p.endpointsDumpLocked()))
	}
	return d
}

func (p *Proxy) clustersDumpLocked() *adminv3.ClustersConfigDump {
	// The bootstrap's only static cluster: the agent's unix socket.
	xds := &clusterv3.Cluster{Name: contract.XDSCluster, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: contract.XDSCluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: p.opts.XDSSocket}}}}}}},
		}}}}
	out := &adminv3.ClustersConfigDump{StaticClusters: []*adminv3.ClustersConfigDump_StaticCluster{{Cluster: mustAny(xds)}}}
	var all []applied
	dyn := func(m map[string]*cluster) []*adminv3.ClustersConfigDump_DynamicCluster {
		names := make([]string, 0, len(m))
		for name, c := range m {
			if c.seen.msg != nil {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		cs := make([]*adminv3.ClustersConfigDump_DynamicCluster, 0, len(names))
		for _, name := range names {
			seen := m[name].seen
			all = append(all, seen)
			cs = append(cs, &adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: seen.version,
				Cluster: mustAny(seen.msg), LastUpdated: timestamppb.New(seen.updated)})
		}
		return cs
	}
	out.DynamicActiveClusters = dyn(p.clusters)
	out.DynamicWarmingClusters = dyn(p.warming)
	out.VersionInfo = newest(all)
	return out
}

func (p *Proxy) listenersDumpLocked() *adminv3.ListenersConfigDump {
	out := &adminv3.ListenersConfigDump{}
	var all []applied
	byName := map[string]*adminv3.ListenersConfigDump_DynamicListener{}
	state := func(a applied) *adminv3.ListenersConfigDump_DynamicListenerState {
		all = append(all, a)
		return &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: a.version, Listener: mustAny(a.msg), LastUpdated: timestamppb.New(a.updated)}
	}
	for name, l := range p.listeners {
		l.mu.RLock()
		seen := l.seen
		l.mu.RUnlock()
		if seen.msg != nil {
			byName[name] = &adminv3.ListenersConfigDump_DynamicListener{Name: name, ActiveState: state(seen)}
		}
	}
	// ListenerManagerImpl::dumpListenerConfigs: a listener replaced by a full
	// update or removed shows in draining_state while it drains; with several,
	// the oldest (Envoy fills the same entry for each, newest first).
	for _, d := range p.draining {
		if d.seen.msg == nil {
			continue
		}
		dl := byName[d.name]
		if dl == nil {
			dl = &adminv3.ListenersConfigDump_DynamicListener{Name: d.name}
			byName[d.name] = dl
		}
		if dl.DrainingState == nil {
			dl.DrainingState = state(d.seen)
		}
	}
	for name, le := range p.bindErrors {
		if le.seen.msg == nil {
			continue
		}
		dl := byName[name]
		if dl == nil {
			dl = &adminv3.ListenersConfigDump_DynamicListener{Name: name}
			byName[name] = dl
		}
		dl.ErrorState = &adminv3.UpdateFailureState{FailedConfiguration: mustAny(le.seen.msg),
			LastUpdateAttempt: timestamppb.New(le.seen.updated), Details: le.err, VersionInfo: le.seen.version}
	}
	for _, dl := range byName {
		out.DynamicListeners = append(out.DynamicListeners, dl)
	}
	sort.Slice(out.DynamicListeners, func(i, j int) bool { return out.DynamicListeners[i].Name < out.DynamicListeners[j].Name })
	out.VersionInfo = newest(all)
	return out
}

func (p *Proxy) endpointsDumpLocked() *adminv3.EndpointsConfigDump {
	out := &adminv3.EndpointsConfigDump{}
	names := make([]string, 0, len(p.rawAssignments))
	for n := range p.rawAssignments {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := p.rawAssignments[n]
		out.DynamicEndpointConfigs = append(out.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{
			VersionInfo: a.version, EndpointConfig: mustAny(a.msg), LastUpdated: timestamppb.New(a.updated)})
	}
	return out
}

// ListenersStatus is /listeners?format=json: every active listener's name
// and address (envoy.admin.v3.Listeners; Envoy lists no more than that).
func (p *Proxy) ListenersStatus() *adminv3.Listeners {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &adminv3.Listeners{}
	for _, l := range p.listeners {
		c := l.config()
		out.ListenerStatuses = append(out.ListenerStatuses, &adminv3.ListenerStatus{Name: c.Name,
			LocalAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: c.Addr.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(c.Addr.Port())}}}}})
	}
	sort.Slice(out.ListenerStatuses, func(i, j int) bool { return out.ListenerStatuses[i].Name < out.ListenerStatuses[j].Name })
	return out
}
