package translatetest

import (
	"net/netip"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ServiceRange is the Service CIDR of the fixtures (kind's default).
var ServiceRange = netip.MustParsePrefix("10.96.0.0/16")

// Options is the node-wide listener state with ServiceRange known and the
// phases as given, in proactive CDS mode.
func Options(phase1, phase2 bool) translate.ListenerOptions {
	return translate.ListenerOptions{Range: []netip.Prefix{ServiceRange}, RangeKnown: true, Phase1: phase1, Phase2: phase2}
}

// NodeIP is ThisNode's InternalIP in the fixtures.
var NodeIP = netip.MustParseAddr("172.18.0.3")

// RepresentativePod is the captured pod of RepresentativeSet.
var RepresentativePod = translate.CapturedPod{Namespace: "default", Name: "client", NetnsPath: "/var/run/netns/cni-0f1e2d3c"}

// RepresentativeSet is one node's snapshot: a captured pod with both phases
// on, a plain Service, a ClientIP + PreferClose Service with a terminating
// endpoint, an ITP Local one, and the apiserver's Service, which gets no
// cluster and whose VIP the listener passes through. onDemand gives the capture listener the
// on-demand CDS mode's cap_svc (the clusters are the same in both modes; on
// demand the agent publishes only those asked for).
func RepresentativeSet(onDemand bool) translate.Set {
	s := translate.Set{Clusters: map[string]*clusterv3.Cluster{}, Loads: map[string]*endpointv3.ClusterLoadAssignment{}, Listeners: map[string]*listenerv3.Listener{}}
	add := func(svc *corev1.Service, eps ...*discoveryv1.EndpointSlice) {
		cs, ls, _ := translate.Service(svc, eps, ThisNode)
		for i := range cs {
			s.Clusters[cs[i].Name], s.Loads[ls[i].ClusterName] = cs[i], ls[i]
		}
	}
	add(Service(), Slice("http", 8080, EP("10.244.1.5"), EP("10.244.2.7")))
	add(Service(func(s *corev1.Service) {
		s.Name, s.Spec.ClusterIP, s.Spec.ClusterIPs = "sticky", "10.96.0.20", []string{"10.96.0.20"}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		s.Spec.Ports[0].TargetPort = intstr.FromString("web")
	}), Slice("http", 8080, EP("10.244.1.8", InZone("zone-a")), EP("10.244.2.9", InZone("zone-b")), EP("10.244.1.10", InZone("zone-a"), Terminating)))
	add(Service(func(s *corev1.Service) {
		s.Name, s.Spec.ClusterIP, s.Spec.ClusterIPs = "local", "10.96.0.30", []string{"10.96.0.30"}
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}), Slice("http", 8080, EP("10.244.2.11", OnNode("node-b"))))
	add(APIServerService(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: contract.APIServerNamespace, Name: contract.APIServerName, Labels: map[string]string{discoveryv1.LabelServiceName: contract.APIServerName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{EP("172.18.0.2")},
	})
	s.Clusters[contract.PassthroughCluster] = translate.PassthroughOriginalDst()
	s.Clusters[contract.BlackholeCluster] = translate.Blackhole()
	o := Options(true, true)
	o.NodeAddrs = []netip.Addr{NodeIP}
	o.OnDemand = onDemand
	o.KubeProxyVIPs = translate.KubeProxyVIPs(APIServerService())
	l := translate.CaptureListener(RepresentativePod, o)
	s.Listeners[l.Name] = l
	return s
}
