package translate

import (
	"net/netip"
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	filterstateoverridev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/local_address_selectors/filter_state_override/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ConnectTimeout bounds an upstream connect of the clusters that are not a Service's
// (passthrough_original_dst, blackhole): Envoy's default. A svc: cluster's is
// contract.SvcConnectTimeout.
const ConnectTimeout = 5 * time.Second

// Port is one IPv4 TCP port of a Service's cluster IP: one svc: cluster.
type Port struct {
	VIP  netip.Addr
	Port uint16
	Name string // the Service port's name, which names the slice port
}

// ServicePorts lists the svc: clusters a Service gets: every TCP port on every IPv4 cluster IP.
// Headless and ExternalName Services get none, and neither does contract.APIServerService, which
// stays kube-proxy's (KubeProxyVIPs).
func ServicePorts(svc *corev1.Service) []Port {
	if contract.IsAPIServerService(svc.Namespace, svc.Name) {
		return nil
	}
	var out []Port
	for _, ip := range clusterIPv4s(svc) {
		for _, p := range svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP || p.Port <= 0 || p.Port > 65535 {
				continue
			}
			out = append(out, Port{VIP: ip, Port: uint16(p.Port), Name: p.Name})
		}
	}
	return out
}

// KubeProxyVIPs are the IPv4 cluster IPs of svc when it is contract.APIServerService (nil
// otherwise): the addresses a capture listener passes through to kube-proxy even in Phase 1
// (ListenerOptions.KubeProxyVIPs).
func KubeProxyVIPs(svc *corev1.Service) []netip.Addr {
	if svc == nil || !contract.IsAPIServerService(svc.Namespace, svc.Name) {
		return nil
	}
	return clusterIPv4s(svc)
}

// clusterIPv4s are svc's IPv4 cluster IPs; none for headless and ExternalName Services.
func clusterIPv4s(svc *corev1.Service) []netip.Addr {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil || !ip.Is4() {
			continue // "None" (headless), IPv6
		}
		out = append(out, ip)
	}
	return out
}

// Service builds the cluster and load assignment of every svc: port of svc from its slices.
// Clusters and loads are index-aligned; endpoints counts the LbEndpoints across them.
func Service(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node Node) (clusters []*clusterv3.Cluster, loads []*endpointv3.ClusterLoadAssignment, endpoints int) {
	for _, p := range ServicePorts(svc) {
		name := contract.ClusterName(p.VIP, p.Port)
		clusters = append(clusters, Cluster(name, contract.StatName(svc.Namespace, svc.Name, p.Port),
			svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP))
		sel := SelectEndpoints(svc, p.Name, eps, node)
		endpoints += len(sel)
		loads = append(loads, LoadAssignment(name, sel))
	}
	return clusters, loads, endpoints
}

// Cluster is the EDS cluster of one Service port.
func Cluster(name, statName string, clientIPAffinity bool) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 name,
		AltStatName:          statName,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ResourceApiVersion:    corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}},
		// Why 2 s, against kube-proxy's SYN schedule: pkg/contract SvcConnectTimeout.
		ConnectTimeout: durationpb.New(contract.SvcConnectTimeout),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
		// kube-proxy has no panic mode: with no healthy host a connection is refused (UH).
		CommonLbConfig:     &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
		OutlierDetection:   outlierDetection(),
		UpstreamBindConfig: SvcUpstreamBindConfig(),
	}
	if clientIPAffinity {
		c.LbPolicy = clusterv3.Cluster_RING_HASH
	}
	return c
}

// SvcUpstreamBindConfig makes a svc: cluster open each upstream socket in the network namespace
// its downstream's filter chain names (cap_svc's envoy.network.upstream_bind_override.network_namespace,
// svcFilterChain): the captured pod's, so the endpoint sees the pod's address, as through
// kube-proxy's DNAT. The filter_state_override selector applies the namespace over the default
// selector's source address (source/extensions/local_address_selectors/filter_state_override/config.cc
// NamespaceLocalAddressSelector::getUpstreamLocalAddress), and only to a source address that
// exists: hence 0.0.0.0:0, which binds to no particular address or port, so the pod's route picks
// its address. Without that object (a connection that names no namespace) the socket is the
// proxy's own netns's, as before.
//
// SO_MARK contract.ProxyUpstreamMark: the upstream's packets leave through the pod's own output
// path, where the capture's output chain returns them unmarked before anything else
// (internal/capture outputRules), so they are never diverted back into the proxy.
//
// IP_BIND_ADDRESS_NO_PORT: a bind to port 0 otherwise takes an ephemeral port at bind(2), one
// no other socket of the pod's netns holds in any state, TIME_WAIT included, whatever its
// destination. Every upstream would then compete with the pod's own connections for the one
// range: at a few hundred new connections a second the range runs out within the 60 s of
// TIME_WAIT and bind fails (EADDRINUSE, a connect failure), and each bind scans an ever fuller
// range. With the option the port is chosen at connect(2) for the whole 4-tuple, as for the
// pod's own unbound sockets. Envoy 1.39 binds without it (envoyproxy/envoy#44747); #45916 makes
// Envoy set it itself for a port-0 source (runtime guard upstream_bind_config_fix_port_exhaustion),
// where this option is the same setsockopt again.
func SvcUpstreamBindConfig() *corev3.BindConfig {
	return &corev3.BindConfig{
		SourceAddress: &corev3.SocketAddress{
			Address:       "0.0.0.0",
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		},
		SocketOptions: []*corev3.SocketOption{proxyMarkOption(), {
			Description: "IP_BIND_ADDRESS_NO_PORT: the source port is chosen at connect",
			Level:       bindNoPortLevel,
			Name:        bindNoPort,
			Value:       &corev3.SocketOption_IntValue{IntValue: 1},
			State:       corev3.SocketOption_STATE_PREBIND,
		}},
		LocalAddressSelector: &corev3.TypedExtensionConfig{
			Name:        netnsAddressSelector,
			TypedConfig: mustAny(&filterstateoverridev3.Config{}),
		},
	}
}

// outlierDetection ejects a host after contract.OutlierConsecutiveFailures failed connect
// attempts in a row (tcp_proxy reports every failed attempt, retried or not, as a local-origin
// error), and only on them.
//
// max_ejection_percent 99 and no always_eject_one_host: Envoy ejects while
// 100 × (ejected+1) / hosts <= max_ejection_percent (source/common/upstream/outlier_detection_impl.cc
// DetectorImpl::ejectHost), where hosts counts every host of the cluster, terminating ones and
// every priority included. With 99 the last host is never ejected, so a one-endpoint Service keeps
// being tried as kube-proxy would (always_eject_one_host would eject it: UH for 30 s, growing to
// 300 s), while one of any 2..n hosts can be; at most 99 % of them are ejected at once.
//
// enforcing_local_origin_success_rate 0, stated: its default 100 would enable the local-origin
// success-rate detector, which kube-proxy has no counterpart of and the built-in proxy does not
// implement (it NACKs the cluster without this field).
func outlierDetection() *clusterv3.OutlierDetection {
	return &clusterv3.OutlierDetection{
		SplitExternalLocalOriginErrors:         true,
		ConsecutiveLocalOriginFailure:          wrapperspb.UInt32(contract.OutlierConsecutiveFailures),
		EnforcingConsecutiveLocalOriginFailure: wrapperspb.UInt32(100),
		EnforcingLocalOriginSuccessRate:        wrapperspb.UInt32(0),
		MaxEjectionPercent:                     wrapperspb.UInt32(maxEjectionPercent),
	}
}

// LoadAssignment groups endpoints into one locality per (priority, zone).
func LoadAssignment(name string, eps []Endpoint) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Policy: &endpointv3.ClusterLoadAssignment_Policy{
			OverprovisioningFactor: wrapperspb.UInt32(Overprovisioning),
		},
	}
	var cur *endpointv3.LocalityLbEndpoints
	for _, e := range eps { // sorted by (priority, zone, address)
		if cur == nil || cur.Priority != e.Priority || cur.Locality.GetZone() != e.Zone {
			cur = &endpointv3.LocalityLbEndpoints{Priority: e.Priority, Locality: &corev3.Locality{Zone: e.Zone}}
			cla.Endpoints = append(cla.Endpoints, cur)
		}
		cur.LbEndpoints = append(cur.LbEndpoints, &endpointv3.LbEndpoint{
			// Terminating endpoints are HEALTHY too: DRAINING would still take traffic in panic
			// mode (envoy#46800) and DEGRADED shares spillover; the band alone orders them.
			HealthStatus: corev3.HealthStatus_HEALTHY,
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socketAddress(e.Addr),
			}},
		})
	}
	return cla
}

func socketAddress(ap netip.AddrPort) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ap.Addr().String(),
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
	}}}
}
