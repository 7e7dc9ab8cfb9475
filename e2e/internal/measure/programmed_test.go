package measure

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dump is a proxy's /config_dump?include_eds holding listener l (nil:
// none), the given active clusters and load assignments.
func dump(t *testing.T, l *listenerv3.Listener, active []*clusterv3.Cluster, loads []*endpointv3.ClusterLoadAssignment) *adminv3.ConfigDump {
	t.Helper()
	cd := &adminv3.ClustersConfigDump{}
	for _, c := range active {
		cd.DynamicActiveClusters = append(cd.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{Cluster: anyOf(t, c)})
	}
	ld := &adminv3.ListenersConfigDump{}
	if l != nil {
		ld.DynamicListeners = []*adminv3.ListenersConfigDump_DynamicListener{{Name: l.GetName(),
			ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{Listener: anyOf(t, l)}}}
	}
	ed := &adminv3.EndpointsConfigDump{}
	for _, la := range loads {
		ed.DynamicEndpointConfigs = append(ed.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{EndpointConfig: anyOf(t, la)})
	}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{anyOf(t, cd), anyOf(t, ld), anyOf(t, ed)}}
}

// TestProgrammedProblem feeds programmedProblem what the agent emits
// (internal/translate) for one setting and the /status of another: the
// wait must hold out exactly until the proxy serves the agent's settings
// and the Service's current endpoints.
func TestProgrammedProblem(t *testing.T) {
	node := translate.Node{Name: "w1", Zone: "zone-a"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "legs", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			Ports: []corev1.ServicePort{{Name: "p0", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	slice := func(ready ...bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			ObjectMeta: metav1.ObjectMeta{Namespace: "legs", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			Ports:      []discoveryv1.EndpointPort{{Name: ptr.To("p0"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
		for i, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{netip.AddrFrom4([4]byte{10, 244, 1, byte(10 + i)}).String()},
				Zone: ptr.To("zone-a"), NodeName: ptr.To("w1"),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r), Serving: ptr.To(true), Terminating: ptr.To(!r)}})
		}
		return s
	}
	rng := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	pod := translate.CapturedPod{Namespace: "legs", Name: "client", NetnsPath: "/var/run/netns/cni-1"}
	status := func(p1, p2 bool, cds agentstatus.CDSMode) *agentstatus.Status {
		return &agentstatus.Status{Phase1: p1, Phase2: p2, CDS: cds, RangeKnown: true, Range: []string{"10.96.0.0/16"},
			Listeners: []agentstatus.ListenerStatus{{Pod: "client", Namespace: "legs", Netns: pod.NetnsPath, Name: "capture~legs~client"}}}
	}
	listener := func(p1, p2, od bool) *listenerv3.Listener {
		return translate.CaptureListener(pod, translate.ListenerOptions{Range: rng, RangeKnown: true, Phase1: p1, Phase2: p2, OnDemand: od})
	}
	withNodeIP := func(st *agentstatus.Status) *agentstatus.Status {
		st.NodeAddresses = []string{"172.18.0.3"}
		return st
	}
	withNodeAddr := func(*listenerv3.Listener) *listenerv3.Listener {
		return translate.CaptureListener(pod, translate.ListenerOptions{Range: rng, RangeKnown: true, NodeAddrs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}})
	}
	// What an agent older than cap_refused emitted: the Service range and nothing else.
	withoutRefused := func(l *listenerv3.Listener) *listenerv3.Listener {
		l.FilterChains = slices.DeleteFunc(l.FilterChains, func(fc *listenerv3.FilterChain) bool { return fc.GetName() == contract.ChainRefused })
		var ipm matcherv3.IPMatcher
		cm := l.GetFilterChainMatcher().GetMatcherTree().GetCustomMatch()
		if err := cm.GetTypedConfig().UnmarshalTo(&ipm); err != nil {
			t.Fatal(err)
		}
		ipm.RangeMatchers = ipm.RangeMatchers[:1]
		cm.TypedConfig = anyOf(t, &ipm)
		return l
	}
	twoReady := []*discoveryv1.EndpointSlice{slice(true, true)}
	oneTerminating := []*discoveryv1.EndpointSlice{slice(true, false)}
	cs, loads, _ := translate.Service(svc, twoReady, node)
	_, loadsAfter, _ := translate.Service(svc, oneTerminating, node)
	web := []serviceState{{svc: svc, slices: twoReady}}

	for _, c := range []struct {
		name   string
		st     *agentstatus.Status
		d      *adminv3.ConfigDump
		svcs   []serviceState
		wantIn string // "" : programmed
	}{
		{"red served", status(false, false, agentstatus.CDSProactive), dump(t, listener(false, false, false), nil, nil), web, ""},
		{"green served", status(true, true, agentstatus.CDSProactive), dump(t, listener(true, true, false), cs, loads), web, ""},
		{"on-demand before any connection", status(true, true, agentstatus.CDSOnDemand), dump(t, listener(true, true, true), nil, nil), web, ""},
		{"flip not applied yet", status(true, true, agentstatus.CDSProactive), dump(t, listener(false, false, false), nil, nil), web,
			`10.96.0.0/16 goes to "cap_passthrough_svc"`},
		{"phase 2 not applied yet", status(true, true, agentstatus.CDSProactive), dump(t, listener(true, false, false), cs, loads), web,
			"access log svclb_refusals: false"},
		{"phase 2 still on", status(true, false, agentstatus.CDSProactive), dump(t, listener(true, true, false), cs, loads), web,
			"access log svclb_refusals: true"},
		{"on-demand not applied yet", status(true, true, agentstatus.CDSOnDemand), dump(t, listener(true, true, false), nil, nil), web, "on_demand: false"},
		{"listener not bound yet", status(false, false, agentstatus.CDSProactive), dump(t, nil, nil, nil), web, "listener capture~legs~client not active"},
		{"cluster not there yet", status(true, true, agentstatus.CDSProactive), dump(t, listener(true, true, false), nil, nil), web,
			`cluster svc:10.96.0.20:80 is "absent", want active`},
		{"cluster still there with phase 1 off", status(false, false, agentstatus.CDSProactive), dump(t, listener(false, false, false), cs, loads), web,
			"cluster svc:10.96.0.20:80 still active with Phase 1 off"},
		// An EndpointSlice change: one backend is terminating now; the
		// proxy still has both ready.
		{"endpoints not applied yet", status(true, true, agentstatus.CDSProactive), dump(t, listener(true, true, false), cs, loads),
			[]serviceState{{svc: svc, slices: oneTerminating}}, "cluster svc:10.96.0.20:80 endpoints"},
		{"endpoints applied", status(true, true, agentstatus.CDSProactive), dump(t, listener(true, true, false), cs, loadsAfter),
			[]serviceState{{svc: svc, slices: oneTerminating}}, ""},
		// The node's addresses: refused once the proxy serves the listener that names them.
		{"node address not applied yet", withNodeIP(status(false, false, agentstatus.CDSProactive)), dump(t, listener(false, false, false), nil, nil), web,
			`node-local 172.18.0.3/32 goes to ""`},
		{"node address applied", withNodeIP(status(false, false, agentstatus.CDSProactive)), dump(t, withNodeAddr(listener(false, false, false)), nil, nil), web, ""},
		{"a listener without cap_refused", status(false, false, agentstatus.CDSProactive), dump(t, withoutRefused(listener(false, false, false)), nil, nil), web,
			`node-local 0.0.0.0/8 goes to ""`},
	} {
		got := programmedProblem(node, c.st, c.d, c.svcs)
		if (c.wantIn == "") != (got == "") || !strings.Contains(got, c.wantIn) {
			t.Errorf("%s: %q, want %q", c.name, got, c.wantIn)
		}
	}
}
