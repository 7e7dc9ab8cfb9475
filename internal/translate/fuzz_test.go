package translate_test

import (
	"encoding/json"
	"testing"

	"github.com/aether-mesh/svclb/internal/translate"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// FuzzService feeds arbitrary EndpointSlices (as JSON) through the translation: it must never
// panic and everything it emits must validate, whatever the apiserver hands over.
func FuzzService(f *testing.F) {
	for _, s := range []*discoveryv1.EndpointSlice{
		slice("http", 8080, ep("10.0.0.1"), ep("10.0.0.2", terminating, inZone("zone-a"), hints("zone-a"))),
		slice("http", 0, ep("10.0.0.1", onNode("node-a"))),
		slice("", 65535, discoveryv1.Endpoint{}, ep("::1"), ep("300.1.1.1")),
	} {
		b, _ := json.Marshal(s)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, local bool) {
		s := &discoveryv1.EndpointSlice{}
		if json.Unmarshal(data, s) != nil {
			return
		}
		svc := service(func(s *corev1.Service) {
			s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
			if local {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}
		})
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "", Port: 81})
		cs, ls, _ := translate.Service(svc, []*discoveryv1.EndpointSlice{s, s}, thisNode)
		for i := range cs {
			if err := translate.Validate(cs[i]); err != nil {
				t.Fatal(err)
			}
			if err := translate.Validate(ls[i]); err != nil {
				t.Fatal(err)
			}
		}
	})
}
