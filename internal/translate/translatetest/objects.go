package translatetest

import (
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ThisNode is the node the agent runs on in every fixture.
var ThisNode = translate.Node{Name: "node-a", Zone: "zone-a"}

// Service is ns/web: cluster IP 10.96.0.10, TCP port "http" 80 → 8080, with
// mut applied in order.
func Service(mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

// Slice is an IPv4 EndpointSlice of ns/web with one TCP port named portName.
func Slice(portName string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-" + portName, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

// EPOpt changes one aspect of an endpoint built by EP.
type EPOpt func(*discoveryv1.Endpoint)

// EP is a ready, serving, not terminating endpoint at ip, with opts applied.
func EP(ip string, opts ...EPOpt) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}
	for _, o := range opts {
		o(&e)
	}
	return e
}

// Terminating: serving but terminating, the fallback set.
func Terminating(e *discoveryv1.Endpoint) {
	e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
}

// NotReady: neither ready nor serving, never used.
func NotReady(e *discoveryv1.Endpoint) {
	e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
}

// TerminatingNotServing: terminating and no longer serving, never used.
func TerminatingNotServing(e *discoveryv1.Endpoint) {
	e.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
}

// OnNode places the endpoint on node n.
func OnNode(n string) EPOpt { return func(e *discoveryv1.Endpoint) { e.NodeName = ptr.To(n) } }

// InZone places the endpoint in zone z.
func InZone(z string) EPOpt { return func(e *discoveryv1.Endpoint) { e.Zone = ptr.To(z) } }

// Hints gives the endpoint topology hints for zones z.
func Hints(z ...string) EPOpt {
	return func(e *discoveryv1.Endpoint) {
		e.Hints = &discoveryv1.EndpointHints{}
		for _, n := range z {
			e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: n})
		}
	}
}

// APIServerService is contract.APIServerService as the apiserver creates it: cluster IP
// 10.96.0.1 (the first of ServiceRange), TCP port "https" 443 → 6443.
func APIServerService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: contract.APIServerNamespace, Name: contract.APIServerName},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}},
		},
	}
}
