package translate

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aether-mesh/svclb/internal/golden"
	"github.com/aether-mesh/svclb/pkg/contract"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// representativeSet is one node's snapshot: a captured pod with both phases on, a plain
// Service, a ClientIP + PreferClose Service with a terminating endpoint, an ITP Local one.
func representativeSet() Set {
	s := Set{Clusters: map[string]*clusterv3.Cluster{}, Loads: map[string]*endpointv3.ClusterLoadAssignment{}, Listeners: map[string]*listenerv3.Listener{}}
	add := func(svc *corev1.Service, eps ...*discoveryv1.EndpointSlice) {
		cs, ls, _ := Service(svc, eps, thisNode)
		for i := range cs {
			s.Clusters[cs[i].Name], s.Loads[ls[i].ClusterName] = cs[i], ls[i]
		}
	}
	add(service(), slice("http", 8080, ep("10.244.1.5"), ep("10.244.2.7")))
	add(service(func(s *corev1.Service) {
		s.Name, s.Spec.ClusterIP, s.Spec.ClusterIPs = "sticky", "10.96.0.20", []string{"10.96.0.20"}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		s.Spec.Ports[0].TargetPort = intstr.FromString("web")
	}), slice("http", 8080, ep("10.244.1.8", inZone("zone-a")), ep("10.244.2.9", inZone("zone-b")), ep("10.244.1.10", inZone("zone-a"), terminating)))
	add(service(func(s *corev1.Service) {
		s.Name, s.Spec.ClusterIP, s.Spec.ClusterIPs = "local", "10.96.0.30", []string{"10.96.0.30"}
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}), slice("http", 8080, ep("10.244.2.11", onNode("node-b"))))
	s.Clusters[contract.PassthroughCluster] = PassthroughOriginalDst()
	l := CaptureListener(CapturedPod{Namespace: "default", Name: "client", NetnsPath: "/var/run/netns/cni-0f1e2d3c"},
		ListenerOptions{Range: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, RangeKnown: true, Phase1: true, Phase2: true})
	s.Listeners[l.Name] = l
	return s
}

// RenderYAML prints a set as readable YAML, resources sorted by name.
func renderYAML(t testing.TB, s Set) []byte {
	var buf bytes.Buffer
	section := func(title string, names []string, get func(string) proto.Message) {
		slices.Sort(names)
		buf.WriteString(title + ":\n")
		for _, n := range names {
			js, err := protojson.Marshal(get(n))
			if err != nil {
				t.Fatal(err)
			}
			y, err := yaml.JSONToYAML(js)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("- ")
			buf.Write(bytes.ReplaceAll(bytes.TrimSuffix(y, []byte("\n")), []byte("\n"), []byte("\n  ")))
			buf.WriteString("\n")
		}
	}
	keys := func(m any) []string {
		var out []string
		switch m := m.(type) {
		case map[string]*clusterv3.Cluster:
			for k := range m {
				out = append(out, k)
			}
		case map[string]*endpointv3.ClusterLoadAssignment:
			for k := range m {
				out = append(out, k)
			}
		case map[string]*listenerv3.Listener:
			for k := range m {
				out = append(out, k)
			}
		}
		return out
	}
	section("listeners", keys(s.Listeners), func(n string) proto.Message { return s.Listeners[n] })
	section("clusters", keys(s.Clusters), func(n string) proto.Message { return s.Clusters[n] })
	section("endpoints", keys(s.Loads), func(n string) proto.Message { return s.Loads[n] })
	return buf.Bytes()
}

func TestGoldenSnapshot(t *testing.T) {
	s := representativeSet()
	for _, m := range s.Clusters {
		if err := Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range s.Loads {
		if err := Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range s.Listeners {
		if err := Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckReferences(s); err != nil {
		t.Fatal(err)
	}
	got := renderYAML(t, s)
	golden.Check(t, filepath.Join("testdata", "snapshot.golden.yaml"), got)
}
