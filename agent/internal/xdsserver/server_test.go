package xdsserver

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

type fakeIndex map[netip.AddrPort]svcindex.Result

func (f fakeIndex) Lookup(dst netip.AddrPort) svcindex.Result {
	if r, ok := f[dst]; ok {
		return r
	}
	if dst.Addr() == netip.MustParseAddr("10.96.0.10") {
		return svcindex.Result{Class: svcindex.PortNotDeclared, Service: k8stypes.NamespacedName{Namespace: "ns", Name: "web"}}
	}
	return svcindex.Result{Class: svcindex.NoService}
}

var web = k8stypes.NamespacedName{Namespace: "ns", Name: "web"}

func testIndex() fakeIndex {
	return fakeIndex{netip.MustParseAddrPort("10.96.0.10:80"): {Class: svcindex.Known, Service: web}}
}

// start serves s on a fresh unix socket and returns a client connection to it.
func start(t *testing.T, idx Index) (*Server, *grpc.ClientConn, *prometheus.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg := prometheus.NewRegistry()
	s, err := New(ctx, idx, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "run", "xds.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn, reg
}

func cla(name string, ips ...string) *endpointv3.ClusterLoadAssignment {
	c := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, ip := range ips {
		c.Endpoints[0].LbEndpoints = append(c.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}}}}})
	}
	return c
}

type adsStream = grpc.BidiStreamingClient[discoverygrpc.DeltaDiscoveryRequest, discoverygrpc.DeltaDiscoveryResponse]

// openADS opens a delta ADS stream; its responses arrive on the channel, closed with the stream.
func openADS(t *testing.T, ctx context.Context, conn *grpc.ClientConn) (adsStream, <-chan *discoverygrpc.DeltaDiscoveryResponse) {
	t.Helper()
	st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *discoverygrpc.DeltaDiscoveryResponse, 16)
	go func() {
		defer close(ch)
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			ch <- r
		}
	}()
	return st, ch
}

// recv reads responses until one of typeURL arrives, ACKing it; nil after timeout.
func recv(t *testing.T, st adsStream, ch <-chan *discoverygrpc.DeltaDiscoveryResponse, typeURL string, timeout time.Duration) *discoverygrpc.DeltaDiscoveryResponse {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("stream closed")
			}
			if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}); err != nil {
				t.Fatal(err)
			}
			if r.TypeUrl == typeURL {
				return r
			}
		case <-deadline:
			return nil
		}
	}
}

func names(r *discoverygrpc.DeltaDiscoveryResponse) []string {
	var out []string
	for _, x := range r.GetResources() {
		out = append(out, x.Name)
	}
	slices.Sort(out)
	return out
}

func TestDeltaADSSubscribeUnsubscribe(t *testing.T) {
	s, conn, _ := start(t, testIndex())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Apply(Update{
		Clusters: map[string]types.Resource{"svc:10.96.0.10:80": &clusterv3.Cluster{Name: "svc:10.96.0.10:80"}, "svc:10.96.0.11:80": &clusterv3.Cluster{Name: "svc:10.96.0.11:80"}},
		Loads:    map[string]types.Resource{"svc:10.96.0.10:80": cla("svc:10.96.0.10:80", "10.244.0.1"), "svc:10.96.0.11:80": cla("svc:10.96.0.11:80")},
	}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ch := openADS(t, ctx, conn)
	node := &corev3.Node{Id: "svclb-node~node-a", Cluster: "svclb"}
	// CDS wildcard: everything published.
	must(st.Send(&discoverygrpc.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}))
	if r := recv(t, st, ch, resource.ClusterType, 5*time.Second); !slices.Equal(names(r), []string{"svc:10.96.0.10:80", "svc:10.96.0.11:80"}) {
		t.Fatalf("CDS: %v", names(r))
	}
	// EDS by name.
	must(st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"svc:10.96.0.10:80"}}))
	if r := recv(t, st, ch, resource.EndpointType, 5*time.Second); !slices.Equal(names(r), []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("EDS subscribe: %v", names(r))
	}
	// An endpoint change of the subscribed name is pushed alone.
	must(s.Apply(Update{Loads: map[string]types.Resource{"svc:10.96.0.10:80": cla("svc:10.96.0.10:80", "10.244.0.1", "10.244.0.2")}}))
	r := recv(t, st, ch, resource.EndpointType, 5*time.Second)
	if !slices.Equal(names(r), []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("EDS update: %v", names(r))
	}
	got := &endpointv3.ClusterLoadAssignment{}
	must(r.Resources[0].Resource.UnmarshalTo(got))
	if n := len(got.Endpoints[0].LbEndpoints); n != 2 {
		t.Fatalf("EDS update carried %d endpoints, want 2", n)
	}
	// Unsubscribed: later changes of that name are not pushed.
	must(st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesUnsubscribe: []string{"svc:10.96.0.10:80"}}))
	// A stream's requests are handled in order, and a nonce-less request of the wildcard CDS
	// subscription is answered even when empty: its answer says the unsubscription is in.
	must(st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType}))
	if r := recv(t, st, ch, resource.ClusterType, 5*time.Second); r == nil || len(r.Resources)+len(r.RemovedResources) > 0 {
		t.Fatalf("CDS answer after the unsubscription: %v", r)
	}
	must(s.Apply(Update{Loads: map[string]types.Resource{"svc:10.96.0.10:80": cla("svc:10.96.0.10:80", "10.244.0.3")}}))
	if r := recv(t, st, ch, resource.EndpointType, 300*time.Millisecond); r != nil {
		t.Fatalf("pushed after unsubscribe: %v", names(r))
	}
	// Deleting a cluster reaches the wildcard subscriber as removed_resources.
	must(s.Apply(Update{DeleteClusters: []string{"svc:10.96.0.11:80"}, DeleteLoads: []string{"svc:10.96.0.11:80"}}))
	r = recv(t, st, ch, resource.ClusterType, 5*time.Second)
	if r == nil || !slices.Equal(r.RemovedResources, []string{"svc:10.96.0.11:80"}) {
		t.Fatalf("CDS delete: %v", r)
	}
}

func TestALSRefusals(t *testing.T) {
	_, conn, reg := start(t, testIndex())
	entry := func(dst string, uh, nc bool) *accesslogdatav3.TCPAccessLogEntry {
		ap := netip.MustParseAddrPort(dst)
		return &accesslogdatav3.TCPAccessLogEntry{CommonProperties: &accesslogdatav3.AccessLogCommon{
			DownstreamLocalAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}},
			ResponseFlags: &accesslogdatav3.ResponseFlags{NoHealthyUpstream: uh, NoClusterFound: nc},
		}}
	}
	st, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = st.Send(&accesslogv3.StreamAccessLogsMessage{
		Identifier: &accesslogv3.StreamAccessLogsMessage_Identifier{LogName: contract.RefusalLogName},
		LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{
			LogEntry: []*accesslogdatav3.TCPAccessLogEntry{
				entry("10.96.0.10:80", true, false),  // UH on a known port
				entry("10.96.0.10:80", true, false),  // twice
				entry("10.96.0.10:81", false, true),  // NC, undeclared port
				entry("10.96.0.99:80", false, true),  // NC, unallocated
				entry("10.96.0.10:80", false, true),  // NC on a known port: not programmed yet
				entry("10.96.0.10:80", false, false), // no refusal flag: ignored
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{contract.ReasonNoEndpoints, "ns", "web"}, 2},
		{[]string{contract.ReasonPortNotDeclared, "ns", "web"}, 1},
		{[]string{contract.ReasonNoService, "", ""}, 1},
		{[]string{contract.ReasonNotProgrammed, "ns", "web"}, 1},
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := 0.0
		for _, mf := range mfs {
			if mf.GetName() != contract.MetricSvcRefused {
				continue
			}
			for _, m := range mf.Metric {
				l := map[string]string{}
				for _, lp := range m.Label {
					l[lp.GetName()] = lp.GetValue()
				}
				if l[contract.LabelReason] == tc.labels[0] && l[contract.LabelNamespace] == tc.labels[1] && l[contract.LabelService] == tc.labels[2] {
					got = m.GetCounter().GetValue()
				}
			}
		}
		if got != tc.want {
			t.Errorf("%s%v = %v, want %v", contract.MetricSvcRefused, tc.labels, got, tc.want)
		}
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == contract.MetricSvcRefused && len(mf.Metric) != 4 {
			t.Errorf("%d series, want 4", len(mf.Metric))
		}
	}
}

type demandLog struct {
	mu   sync.Mutex
	sub  []string
	uns  []string
	n    int
	call chan struct{}
	// forget are the names the handler does not keep.
	forget map[string]bool
}

func (d *demandLog) ClusterDemand(sub, unsub []string) (forget []string) {
	d.mu.Lock()
	d.sub, d.uns, d.n = append(d.sub, sub...), append(d.uns, unsub...), d.n+1
	for _, n := range sub {
		if d.forget[n] {
			forget = append(forget, n)
		}
	}
	d.mu.Unlock()
	d.call <- struct{}{}
	return forget
}

// TestClusterDemand: named CDS subscriptions reach the DemandHandler without "*", ACKs and other
// types do not, and a legacy wildcard subscription stays wildcard after names are added: a
// cluster published later, asked for or not, is pushed.
func TestClusterDemand(t *testing.T) {
	s, conn, _ := start(t, testIndex())
	d := &demandLog{call: make(chan struct{}, 16)}
	s.SetDemandHandler(d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ch := openADS(t, ctx, conn)
	send := func(r *discoverygrpc.DeltaDiscoveryRequest) {
		t.Helper()
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	called := func(what string) {
		t.Helper()
		select {
		case <-d.call:
		case <-time.After(5 * time.Second):
			t.Fatalf("handler not called for %s", what)
		}
	}
	send(&discoverygrpc.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "svclb-node~node-a"}, TypeUrl: resource.ClusterType})
	if r := recv(t, st, ch, resource.ClusterType, 5*time.Second); r == nil || len(r.Resources) != 0 {
		t.Fatalf("first wildcard response %v", r)
	}
	send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"svc:10.96.0.10:80"}})
	send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*", "svc:10.96.0.10:80"}})
	called("a subscription")
	send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesUnsubscribe: []string{"svc:10.96.0.12:80"}})
	called("an unsubscription")
	d.mu.Lock()
	if d.n != 2 || !slices.Equal(d.sub, []string{"svc:10.96.0.10:80"}) || !slices.Equal(d.uns, []string{"svc:10.96.0.12:80"}) {
		t.Fatalf("handler saw %d calls, subscribe %v, unsubscribe %v", d.n, d.sub, d.uns)
	}
	d.mu.Unlock()
	// go-control-plane answers every request of a wildcard subscription that carries no nonce,
	// empty when nothing changed (LinearCache.CreateDeltaWatch, replyEvenIfEmpty); skip those.
	cds := func() *discoverygrpc.DeltaDiscoveryResponse {
		t.Helper()
		for {
			r := recv(t, st, ch, resource.ClusterType, 5*time.Second)
			if r == nil || len(r.Resources)+len(r.RemovedResources) > 0 {
				return r
			}
		}
	}
	// The requested cluster appears later: pushed to the waiting subscription.
	if err := s.Apply(Update{Clusters: map[string]types.Resource{"svc:10.96.0.10:80": &clusterv3.Cluster{Name: "svc:10.96.0.10:80"}},
		Loads: map[string]types.Resource{"svc:10.96.0.10:80": cla("svc:10.96.0.10:80")}}); err != nil {
		t.Fatal(err)
	}
	if r := cds(); !slices.Equal(names(r), []string{"svc:10.96.0.10:80"}) {
		t.Fatalf("requested cluster: %v", names(r))
	}
	// Still wildcard: an unrequested cluster reaches it too (restored names after a restart).
	if err := s.Apply(Update{Clusters: map[string]types.Resource{"passthrough_original_dst": &clusterv3.Cluster{Name: "passthrough_original_dst"}}}); err != nil {
		t.Fatal(err)
	}
	if r := cds(); !slices.Equal(names(r), []string{"passthrough_original_dst"}) {
		t.Fatalf("wildcard lost: %v", names(r))
	}
	select {
	case <-d.call:
		t.Fatal("ACKs or EDS requests reached the handler")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestForgottenNamesAnsweredRemoved: a name the handler does not keep is answered at once in
// removed_resources on a wildcard stream, go-control-plane keeps no state for it, and a cluster
// published later under that name still reaches the proxy through the wildcard. Without a
// wildcard nothing is answered (it could not be delivered later).
func TestForgottenNamesAnsweredRemoved(t *testing.T) {
	s, conn, _ := start(t, testIndex())
	d := &demandLog{call: make(chan struct{}, 16), forget: map[string]bool{"svc:10.96.0.99:80": true, "svc:10.96.0.98:80": true}}
	s.SetDemandHandler(d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ch := openADS(t, ctx, conn)
	send := func(r *discoverygrpc.DeltaDiscoveryRequest) {
		t.Helper()
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	cds := func() *discoverygrpc.DeltaDiscoveryResponse {
		t.Helper()
		for {
			r := recv(t, st, ch, resource.ClusterType, 5*time.Second)
			if r == nil || len(r.Resources)+len(r.RemovedResources) > 0 {
				return r
			}
		}
	}
	send(&discoverygrpc.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "svclb-node~node-a"}, TypeUrl: resource.ClusterType})
	if r := recv(t, st, ch, resource.ClusterType, 5*time.Second); r == nil {
		t.Fatal("no first wildcard response")
	}
	send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*", "svc:10.96.0.10:80", "svc:10.96.0.99:80"}})
	r := cds()
	if r == nil || !slices.Equal(r.RemovedResources, []string{"svc:10.96.0.99:80"}) || len(r.Resources) != 0 {
		t.Fatalf("forgotten name: response %v, want it removed", r)
	}
	// Published later (a Service created at that address): delivered.
	if err := s.Apply(Update{Clusters: map[string]types.Resource{"svc:10.96.0.99:80": &clusterv3.Cluster{Name: "svc:10.96.0.99:80"}}}); err != nil {
		t.Fatal(err)
	}
	if r := cds(); !slices.Equal(names(r), []string{"svc:10.96.0.99:80"}) {
		t.Fatalf("cluster at a forgotten name: %v", names(r))
	}

	// A stream whose first request names clusters without "*" is not wildcard: left alone.
	st2, ch2 := openADS(t, ctx, conn)
	if err := st2.Send(&discoverygrpc.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "svclb-node~node-a"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{"svc:10.96.0.98:80"}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, st2, ch2, resource.ClusterType, 300*time.Millisecond); r != nil && len(r.RemovedResources) > 0 {
		t.Fatalf("non-wildcard stream answered removed %v", r.RemovedResources)
	}
}
