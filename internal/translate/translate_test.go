package translate_test

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/pkg/contract"

	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The shared fixtures under the short names the tables below read best with.
var (
	thisNode              = translatetest.ThisNode
	service               = translatetest.Service
	slice                 = translatetest.Slice
	ep                    = translatetest.EP
	terminating           = translatetest.Terminating
	notReady              = translatetest.NotReady
	terminatingNotServing = translatetest.TerminatingNotServing
	onNode                = translatetest.OnNode
	inZone                = translatetest.InZone
	hints                 = translatetest.Hints
	listenerOpts          = translatetest.Options
)

// render prints "priority/zone/addr[T]" per endpoint: compact enough for a table.
func render(eps []translate.Endpoint) string {
	var b []string
	for _, e := range eps {
		s := strings.Join([]string{string(rune('0' + e.Priority)), e.Zone, e.Addr.String()}, "/")
		if e.Terminating {
			s += "T"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

func TestSelectEndpoints(t *testing.T) {
	itpLocal := func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}
	preferClose := func(s *corev1.Service) {
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	}
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		node   translate.Node
		want   string
	}{
		{name: "ready in band 0", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080, ep("10.0.0.2"), ep("10.0.0.1"))},
			want: "0//10.0.0.1:8080 0//10.0.0.2:8080"},
		{name: "nil conditions mean ready", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}})}, want: "0//10.0.0.1:8080"},
		{name: "serving+terminating after ready", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080, ep("10.0.0.1", terminating), ep("10.0.0.2"))},
			want: "0//10.0.0.2:8080 1//10.0.0.1:8080T"},
		{name: "only terminating: still contiguous from 0", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080, ep("10.0.0.1", terminating))},
			want: "0//10.0.0.1:8080T"},
		{name: "neither ready nor serving-terminating: absent", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", notReady), ep("10.0.0.2", terminatingNotServing))}, want: ""},
		{name: "ITP Local keeps this node only", svc: service(itpLocal), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", onNode("node-a")), ep("10.0.0.2", onNode("node-b")), ep("10.0.0.3"))}, node: thisNode, want: "0//10.0.0.1:8080"},
		{name: "ITP Local none local: empty", svc: service(itpLocal), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.2", onNode("node-b")))}, node: thisNode, want: ""},
		{name: "PreferClose: this zone first", svc: service(preferClose), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b")), ep("10.0.0.2", inZone("zone-a")), ep("10.0.0.3", inZone("zone-c")))}, node: thisNode,
			want: "0/zone-a/10.0.0.2:8080 1/zone-b/10.0.0.1:8080 1/zone-c/10.0.0.3:8080"},
		{name: "PreferClose with terminating: four bands", svc: service(preferClose), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b")), ep("10.0.0.2", inZone("zone-a")), ep("10.0.0.3", inZone("zone-a"), terminating), ep("10.0.0.4", inZone("zone-b"), terminating))}, node: thisNode,
			want: "0/zone-a/10.0.0.2:8080 1/zone-b/10.0.0.1:8080 2/zone-a/10.0.0.3:8080T 3/zone-b/10.0.0.4:8080T"},
		{name: "PreferClose nothing in this zone: one band", svc: service(preferClose), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b")))}, node: thisNode, want: "0/zone-b/10.0.0.1:8080"},
		{name: "PreferClose without node zone: no topology", svc: service(preferClose), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b")), ep("10.0.0.2", inZone("zone-a")))}, node: translate.Node{Name: "node-a"},
			want: "0/zone-a/10.0.0.2:8080 0/zone-b/10.0.0.1:8080"},
		{name: "no PreferClose: zones ignored", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b")), ep("10.0.0.2", inZone("zone-a")))}, node: thisNode,
			want: "0/zone-a/10.0.0.2:8080 0/zone-b/10.0.0.1:8080"},
		{name: "hints win over PreferClose", svc: service(preferClose), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b"), hints("zone-a")), ep("10.0.0.2", inZone("zone-a"), hints("zone-c")))}, node: thisNode,
			want: "0/zone-b/10.0.0.1:8080 1/zone-a/10.0.0.2:8080"},
		{name: "hints alone apply", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("http", 8080,
			ep("10.0.0.1", inZone("zone-b"), hints("zone-b")), ep("10.0.0.2", inZone("zone-c"), hints("zone-a")))}, node: thisNode,
			want: "0/zone-c/10.0.0.2:8080 1/zone-b/10.0.0.1:8080"},
		{name: "merged across slices, deduped, ready copy wins", svc: service(), slices: []*discoveryv1.EndpointSlice{
			slice("http", 8080, ep("10.0.0.1", terminating), ep("10.0.0.2")),
			slice("http", 8080, ep("10.0.0.1"), ep("10.0.0.3"), ep("10.0.0.2"))},
			want: "0//10.0.0.1:8080 0//10.0.0.2:8080 0//10.0.0.3:8080"},
		{name: "named targetPort resolved per slice", svc: service(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("web") }),
			slices: []*discoveryv1.EndpointSlice{slice("http", 8080, ep("10.0.0.1")), slice("http", 9090, ep("10.0.0.2"))},
			want:   "0//10.0.0.1:8080 0//10.0.0.2:9090"},
		{name: "no slice port of the Service port's name: empty", svc: service(), slices: []*discoveryv1.EndpointSlice{slice("other", 8080, ep("10.0.0.1"))}, want: ""},
		{name: "IPv6 and FQDN slices ignored", svc: service(), slices: func() []*discoveryv1.EndpointSlice {
			v6 := slice("http", 8080, ep("fd00::1"))
			v6.AddressType = discoveryv1.AddressTypeIPv6
			fq := slice("http", 8080, ep("db.example.com"))
			fq.AddressType = discoveryv1.AddressTypeFQDN
			return []*discoveryv1.EndpointSlice{v6, fq, slice("http", 8080, ep("10.0.0.1"))}
		}(), want: "0//10.0.0.1:8080"},
		{name: "endpoints without addresses or ports skipped", svc: service(), slices: func() []*discoveryv1.EndpointSlice {
			noPort := slice("http", 8080, ep("10.0.0.9"))
			noPort.Ports[0].Port = nil
			udp := slice("http", 8080, ep("10.0.0.8"))
			udp.Ports[0].Protocol = ptr.To(corev1.ProtocolUDP)
			bad := slice("http", 8080, discoveryv1.Endpoint{}, ep("not-an-ip"), ep("10.0.0.1"))
			return []*discoveryv1.EndpointSlice{noPort, udp, bad, nil}
		}(), want: "0//10.0.0.1:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(translate.SelectEndpoints(tc.svc, "http", tc.slices, tc.node))
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestServicePorts(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want []string
	}{
		{"clusterIP", service(), []string{"svc:10.96.0.10:80"}},
		{"headless", service(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} }), nil},
		{"ExternalName", service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }), nil},
		{"dual-stack keeps IPv4", service(func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"fd00::10", "10.96.0.11"} }), []string{"svc:10.96.0.11:80"}},
		{"the apiserver's Service stays kube-proxy's", translatetest.APIServerService(), nil},
		{"a kubernetes Service elsewhere is an ordinary one", service(func(s *corev1.Service) { s.Name = contract.APIServerName }), []string{"svc:10.96.0.10:80"}},
		{"UDP ports skipped", service(func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
				corev1.ServicePort{Name: "alt", Port: 81})
		}), []string{"svc:10.96.0.10:80", "svc:10.96.0.10:81"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range translate.ServicePorts(tc.svc) {
				got = append(got, contract.ClusterName(p.VIP, p.Port))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestServiceCluster(t *testing.T) {
	svc := service(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP })
	cs, ls, n := translate.Service(svc, []*discoveryv1.EndpointSlice{slice("http", 8080, ep("10.0.0.1"), ep("10.0.0.2", terminating))}, thisNode)
	if len(cs) != 1 || len(ls) != 1 || n != 2 {
		t.Fatalf("got %d clusters, %d loads, %d endpoints", len(cs), len(ls), n)
	}
	c, l := cs[0], ls[0]
	for _, m := range []interface{ ValidateAll() error }{c, l} {
		if err := translate.Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	if c.Name != "svc:10.96.0.10:80" || c.AltStatName != "svc.ns.web.80" || l.ClusterName != c.Name {
		t.Errorf("names: %s %s %s", c.Name, c.AltStatName, l.ClusterName)
	}
	if c.LbPolicy != clusterv3.Cluster_RING_HASH {
		t.Errorf("ClientIP affinity: lb policy %v, want RING_HASH", c.LbPolicy)
	}
	if c.GetCommonLbConfig().GetHealthyPanicThreshold() == nil || c.CommonLbConfig.HealthyPanicThreshold.Value != 0 {
		t.Error("healthy_panic_threshold must be set to 0 explicitly")
	}
	// Exactly these fields: always_eject_one_host unset (the last host is never ejected),
	// enforcing_local_origin_success_rate stated as 0 (its default 100 enables a detector).
	wantOD := &clusterv3.OutlierDetection{
		SplitExternalLocalOriginErrors:         true,
		ConsecutiveLocalOriginFailure:          wrapperspb.UInt32(5),
		EnforcingConsecutiveLocalOriginFailure: wrapperspb.UInt32(100),
		EnforcingLocalOriginSuccessRate:        wrapperspb.UInt32(0),
		MaxEjectionPercent:                     wrapperspb.UInt32(99),
	}
	if od := c.GetOutlierDetection(); !proto.Equal(od, wantOD) {
		t.Errorf("outlier detection:\n got %v\nwant %v", od, wantOD)
	}
	if got := l.GetPolicy().GetOverprovisioningFactor().GetValue(); got != 10_000_000 {
		t.Errorf("overprovisioning %d, want 10^7", got)
	}
	if len(l.Endpoints) != 2 || l.Endpoints[0].Priority != 0 || l.Endpoints[1].Priority != 1 {
		t.Fatalf("bands: %v", l.Endpoints)
	}
	for _, le := range l.Endpoints {
		for _, e := range le.LbEndpoints {
			if e.HealthStatus.String() != "HEALTHY" {
				t.Errorf("endpoint %v: %v, want HEALTHY", e.GetEndpoint().GetAddress(), e.HealthStatus)
			}
		}
	}
	plain, _, _ := translate.Service(service(), nil, thisNode)
	if plain[0].LbPolicy != clusterv3.Cluster_ROUND_ROBIN {
		t.Errorf("no affinity: %v", plain[0].LbPolicy)
	}
}

func onDemand(o translate.ListenerOptions) translate.ListenerOptions {
	o.OnDemand = true
	return o
}

func apiserverVIP(o translate.ListenerOptions, vip string) translate.ListenerOptions {
	o.KubeProxyVIPs = []netip.Addr{netip.MustParseAddr(vip)}
	return o
}

func chainNames(l *listenerv3.Listener) []string {
	var out []string
	for _, fc := range l.FilterChains {
		out = append(out, fc.Name)
	}
	return append(out, "default="+l.GetDefaultFilterChain().GetName())
}

func TestCaptureListener(t *testing.T) {
	pod := translate.CapturedPod{Namespace: "ns", Name: "client", NetnsPath: "/var/run/netns/cni-1"}
	for _, tc := range []struct {
		name      string
		opts      translate.ListenerOptions
		chains    string
		action    string
		accessLog bool
	}{
		{"phase1+2", listenerOpts(true, true), "cap_svc cap_refused default=cap_passthrough", "cap_svc,cap_refused", true},
		{"phase1 only", listenerOpts(true, false), "cap_svc cap_refused default=cap_passthrough", "cap_svc,cap_refused", false},
		{"phase1 off", listenerOpts(false, true), "cap_passthrough_svc cap_refused default=cap_passthrough", "cap_passthrough_svc,cap_refused", false},
		{"range unknown", translate.ListenerOptions{Phase1: true, Phase2: true}, "cap_refused default=cap_passthrough", "cap_refused", false},
		{"on-demand", onDemand(listenerOpts(true, true)), "cap_svc cap_refused default=cap_passthrough", "cap_svc,cap_refused", true},
		{"on-demand, phase1 off", onDemand(listenerOpts(false, true)), "cap_passthrough_svc cap_refused default=cap_passthrough", "cap_passthrough_svc,cap_refused", false},
		{"apiserver VIP, phase1+2", apiserverVIP(listenerOpts(true, true), "10.96.0.1"), "cap_svc cap_passthrough_svc cap_refused default=cap_passthrough", "cap_svc,cap_passthrough_svc,cap_refused", true},
		{"apiserver VIP, on-demand", onDemand(apiserverVIP(listenerOpts(true, true), "10.96.0.1")), "cap_svc cap_passthrough_svc cap_refused default=cap_passthrough", "cap_svc,cap_passthrough_svc,cap_refused", true},
		{"apiserver VIP, phase1 off", apiserverVIP(listenerOpts(false, true), "10.96.0.1"), "cap_passthrough_svc cap_refused default=cap_passthrough", "cap_passthrough_svc,cap_refused", false},
		{"apiserver VIP outside the range", apiserverVIP(listenerOpts(true, true), "10.97.0.1"), "cap_svc cap_refused default=cap_passthrough", "cap_svc,cap_refused", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := translate.CaptureListener(pod, tc.opts)
			if err := translate.Validate(l); err != nil {
				t.Fatal(err)
			}
			set := translate.Set{Listeners: map[string]*listenerv3.Listener{l.Name: l},
				Clusters: map[string]*clusterv3.Cluster{contract.PassthroughCluster: translate.PassthroughOriginalDst(),
					contract.BlackholeCluster: translate.Blackhole()}}
			if err := translate.CheckReferences(set); err != nil {
				t.Fatal(err)
			}
			if l.Name != "capture~ns~client" || l.GetAddress().GetSocketAddress().GetNetworkNamespaceFilepath() != pod.NetnsPath ||
				l.GetAddress().GetSocketAddress().GetPortValue() != 18001 || !l.GetTransparent().GetValue() {
				t.Errorf("listener basics: %v", l)
			}
			// Loopback only: bound on every address, it would take a dial of <podIP>:18001
			// from outside and pass it through back into itself.
			if got := l.GetAddress().GetSocketAddress().GetAddress(); got != "127.0.0.1" {
				t.Errorf("listener address %q, want 127.0.0.1", got)
			}
			if got := strings.Join(chainNames(l), " "); got != tc.chains {
				t.Errorf("chains %q, want %q", got, tc.chains)
			}
			actions, err := translate.MatcherActions(l.FilterChainMatcher)
			if err != nil || strings.Join(actions, ",") != tc.action {
				t.Errorf("matcher actions %v (%v), want %q", actions, err, tc.action)
			}
			hasLog := false
			var od []*tcpproxyv3.TcpProxy_OnDemand
			for _, fc := range append(l.FilterChains, l.DefaultFilterChain) {
				for _, f := range fc.Filters {
					tp := &tcpproxyv3.TcpProxy{}
					if f.GetTypedConfig().MessageIs(tp) {
						_ = f.GetTypedConfig().UnmarshalTo(tp)
						if fc.Name == contract.ChainSvc {
							hasLog = hasLog || len(tp.AccessLog) > 0
						}
						if tp.OnDemand != nil {
							od = append(od, tp.OnDemand)
							if fc.Name != contract.ChainSvc {
								t.Errorf("on_demand on chain %s", fc.Name)
							}
						}
					}
				}
			}
			if hasLog != tc.accessLog {
				t.Errorf("access log present %v, want %v", hasLog, tc.accessLog)
			}
			wantOD := tc.opts.OnDemand && tc.opts.Phase1 && tc.opts.RangeKnown
			if (len(od) == 1) != wantOD || len(od) > 1 {
				t.Fatalf("on_demand configs %v, want one: %v", od, wantOD)
			}
			if wantOD {
				src := od[0].GetOdcdsConfig()
				if src.GetAds() == nil || src.GetResourceApiVersion() != corev3.ApiVersion_V3 || src.GetInitialFetchTimeout() != nil ||
					od[0].GetTimeout().AsDuration() != translate.OnDemandTimeout || od[0].GetResourcesLocator() != "" {
					t.Errorf("on_demand %v, want {odcds_config: {ads: {}, resource_api_version: V3}, timeout: 5s}", od[0])
				}
			}
		})
	}
}

func TestCheckReferencesRejects(t *testing.T) {
	pod := translate.CapturedPod{Namespace: "ns", Name: "client", NetnsPath: "/var/run/netns/cni-1"}
	good := func() translate.Set {
		l := translate.CaptureListener(pod, listenerOpts(true, true))
		cs, ls, _ := translate.Service(service(), nil, thisNode)
		return translate.Set{
			Listeners: map[string]*listenerv3.Listener{l.Name: l},
			Clusters: map[string]*clusterv3.Cluster{contract.PassthroughCluster: translate.PassthroughOriginalDst(), cs[0].Name: cs[0],
				contract.BlackholeCluster: translate.Blackhole()},
			Loads: map[string]*endpointv3.ClusterLoadAssignment{ls[0].ClusterName: ls[0]},
		}
	}
	if err := translate.CheckReferences(good()); err != nil {
		t.Fatalf("good set rejected: %v", err)
	}
	for _, tc := range []struct {
		name string
		mut  func(*translate.Set)
		want string
	}{
		{"passthrough cluster missing", func(s *translate.Set) { delete(s.Clusters, contract.PassthroughCluster) }, "not published"},
		{"load assignment missing", func(s *translate.Set) { clear(s.Loads) }, "no load assignment"},
		{"orphan load assignment", func(s *translate.Set) { delete(s.Clusters, "svc:10.96.0.10:80") }, "no cluster"},
		{"matcher names a missing chain", func(s *translate.Set) { s.Listeners["capture~ns~client"].FilterChains[0].Name = "other" }, "does not exist"},
		{"blackhole cluster missing", func(s *translate.Set) { delete(s.Clusters, contract.BlackholeCluster) }, "not published"},
		{"a node-local range passes through", func(s *translate.Set) {
			l := s.Listeners["capture~ns~client"]
			l.FilterChainMatcher = translate.CaptureListener(pod, translate.ListenerOptions{}).FilterChainMatcher
			l.FilterChainMatcher.GetMatcherTree().GetCustomMatch().TypedConfig = mustAnyT(t, &matcherv3.IPMatcher{})
		}, "node-local range 0.0.0.0/8"},
		{"cap_refused goes elsewhere", func(s *translate.Set) {
			l := s.Listeners["capture~ns~client"]
			for _, fc := range l.FilterChains {
				if fc.Name == contract.ChainRefused {
					fc.Filters = translate.CaptureListener(pod, translate.ListenerOptions{}).DefaultFilterChain.Filters
				}
			}
		}, "does not go to cluster blackhole"},
		{"duplicate chain", func(s *translate.Set) {
			s.Listeners["capture~ns~client"].FilterChains[0].Name = contract.ChainPassthrough
		}, "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.mut(&s)
			err := translate.CheckReferences(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateRejectsInvalid(t *testing.T) {
	c := translate.Cluster("", "x", false) // empty name violates the proto's rules
	if err := translate.Validate(c); err == nil {
		t.Error("cluster without name validated")
	}
	l := translate.CaptureListener(translate.CapturedPod{Namespace: "ns", Name: "p"}, listenerOpts(true, true))
	l.ListenerFilters[0].GetTypedConfig().TypeUrl = "type.googleapis.com/nope.Nope"
	if err := translate.Validate(l); err == nil {
		t.Error("listener with unresolvable typed config validated")
	}
}

func TestCheckChanged(t *testing.T) {
	cs, ls, _ := translate.Service(service(), nil, thisNode)
	s := translate.Set{Clusters: map[string]*clusterv3.Cluster{cs[0].Name: cs[0]}, Loads: map[string]*endpointv3.ClusterLoadAssignment{}}
	if err := translate.CheckChanged(s, []string{cs[0].Name}, nil); err == nil {
		t.Error("changed cluster without load assignment accepted")
	}
	if err := translate.CheckChanged(s, nil, nil); err != nil {
		t.Errorf("unchanged names are not checked: %v", err)
	}
	s.Loads[ls[0].ClusterName] = ls[0]
	delete(s.Clusters, cs[0].Name)
	if err := translate.CheckChanged(s, []string{cs[0].Name}, nil); err == nil {
		t.Error("deleted cluster whose load assignment stayed accepted")
	}
}

// envoyAvailability is a priority band's availability as Envoy computes it (no weights, no
// degraded hosts): min(100, factor × healthy / total), the product in 64 bits, the result
// converted to uint32 (load_balancer_impl.cc LoadBalancerBase::recalculatePerPriorityState).
func envoyAvailability(factor uint32, healthy, total uint64) uint32 {
	return min(100, uint32(uint64(factor)*healthy/total))
}

// TestOverprovisioningKeepsBand: with the agent's factor a band with one usable host keeps
// all the load, up to 10^5 hosts in the band, so terminating and other-zone bands take
// traffic only when a band has none; Envoy's default would spill at the first ejection.
func TestOverprovisioningKeepsBand(t *testing.T) {
	for _, total := range []uint64{1, 2, 3, 10, 1000, 100_000} {
		if got := envoyAvailability(translate.Overprovisioning, 1, total); got != 100 {
			t.Errorf("1 usable host of %d: availability %d, want 100", total, got)
		}
		if got := envoyAvailability(translate.Overprovisioning, 0, total); got != 0 {
			t.Errorf("0 usable hosts of %d: availability %d, want 0", total, got)
		}
	}
	// The quotient is at most the factor: it fits the uint32 Envoy converts it to.
	if uint64(translate.Overprovisioning) > math.MaxUint32 {
		t.Errorf("factor %d overflows uint32", translate.Overprovisioning)
	}
	if got := envoyAvailability(140, 1, 2); got != 70 {
		t.Errorf("the default factor, 1 of 2 ejected: %d, want 70 (30 %% to the next band)", got)
	}
}

func mustAnyT(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
