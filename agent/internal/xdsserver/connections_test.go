package xdsserver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// fakeSources answers from a map of pod addresses.
type fakeSources map[netip.Addr]Source

func (f fakeSources) Source(ip netip.Addr) (Source, bool) {
	s, ok := f[ip]
	return s, ok
}

var (
	clientA = netip.MustParseAddr("10.244.0.5")
	clientB = netip.MustParseAddr("10.244.0.6")
	api     = k8stypes.NamespacedName{Namespace: "ns", Name: "api"}
)

func connIndex() fakeIndex {
	idx := testIndex()
	idx[netip.MustParseAddrPort("10.96.0.11:443")] = svcindex.Result{Class: svcindex.Known, Service: api}
	return idx
}

func sockAddr(ap netip.AddrPort) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}
}

// connEntry is the entry the proxy writes as the upstream of a connection from src to dst
// connects (typ TcpUpstreamConnected) or as it ends.
func connEntry(src netip.Addr, dst string, typ accesslogdatav3.AccessLogType) *accesslogdatav3.TCPAccessLogEntry {
	d := netip.MustParseAddrPort(dst)
	return &accesslogdatav3.TCPAccessLogEntry{CommonProperties: &accesslogdatav3.AccessLogCommon{
		DownstreamRemoteAddress: sockAddr(netip.AddrPortFrom(src, 40000)),
		DownstreamLocalAddress:  sockAddr(d),
		UpstreamCluster:         contract.ClusterName(d.Addr(), d.Port()),
		UpstreamRemoteAddress:   sockAddr(netip.MustParseAddrPort("10.244.1.9:8080")),
		ResponseFlags:           &accesslogdatav3.ResponseFlags{},
		AccessLogType:           typ,
	}}
}

// connSeries reads every series of MetricSvcConnections as
// "source_namespace/source_workload→namespace/service:port" → count.
func connSeries(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != contract.MetricSvcConnections {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[fmt.Sprintf("%s/%s→%s/%s:%s", l[contract.LabelSourceNamespace], l[contract.LabelSourceWorkload],
				l[contract.LabelNamespace], l[contract.LabelService], l[contract.LabelPort])] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestALSConnections: the connected entries of the connection log, through the real gRPC
// handler, count per source workload and Service port; an address no pod has counts as
// unknown; the end of a connection and a destination that is not a known Service port do
// not count; connected entries on the refusal log are not connections.
func TestALSConnections(t *testing.T) {
	s, conn, reg := start(t, connIndex())
	s.SetSources(fakeSources{
		clientA: {Namespace: "a", Pod: "client-7d9f-x1", Workload: "client"},
		clientB: {Namespace: "b", Pod: "job-1", Workload: "job"},
	})
	connected, end := accesslogdatav3.AccessLogType_TcpUpstreamConnected, accesslogdatav3.AccessLogType_TcpConnectionEnd
	var entries []*accesslogdatav3.TCPAccessLogEntry
	for range 3 {
		entries = append(entries, connEntry(clientA, "10.96.0.10:80", connected))
	}
	for range 2 {
		entries = append(entries, connEntry(clientA, "10.96.0.11:443", connected), connEntry(clientB, "10.96.0.11:443", connected))
	}
	entries = append(entries,
		connEntry(netip.MustParseAddr("10.244.9.9"), "10.96.0.10:80", connected), // no pod has it
		connEntry(clientA, "10.96.0.10:80", end),                                 // the same connection's end
		connEntry(clientA, "10.96.0.99:80", connected),                           // no Service (any more)
	)
	send := func(logName string, es []*accesslogdatav3.TCPAccessLogEntry) {
		t.Helper()
		st, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// As the proxy sends them: the identifier on the first message only.
		for i, e := range es {
			m := &accesslogv3.StreamAccessLogsMessage{LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{
				TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{LogEntry: []*accesslogdatav3.TCPAccessLogEntry{e}}}}
			if i == 0 {
				m.Identifier = &accesslogv3.StreamAccessLogsMessage_Identifier{LogName: logName}
			}
			if err := st.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.CloseAndRecv(); err != nil {
			t.Fatal(err)
		}
	}
	send(contract.ConnectionLogName, entries)
	send(contract.RefusalLogName, []*accesslogdatav3.TCPAccessLogEntry{connEntry(clientB, "10.96.0.10:80", connected)})
	want := map[string]float64{
		"a/client→ns/web:80":                        3,
		"a/client→ns/api:443":                       2,
		"b/job→ns/api:443":                          2,
		"/" + contract.SourceUnknown + "→ns/web:80": 1,
	}
	got := connSeries(t, reg)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", contract.MetricSvcConnections, got, want)
	}
}

// TestConnectionsOverflow: past the bound every new label set counts in the one overflow
// series; the label sets counted before go on counting in their own.
func TestConnectionsOverflow(t *testing.T) {
	const limit = 3
	c := newConnections(limit)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.vec)
	for i := range limit + 4 {
		for range 2 {
			c.counter(connKey{srcNamespace: "a", srcWorkload: fmt.Sprintf("w%d", i), namespace: "ns", service: "web", port: "80"}).Inc()
		}
	}
	c.counter(connKey{srcNamespace: "a", srcWorkload: "w0", namespace: "ns", service: "web", port: "80"}).Inc()
	want := map[string]float64{
		"a/w0→ns/web:80": 3, "a/w1→ns/web:80": 2, "a/w2→ns/web:80": 2,
		"/" + contract.SourceOverflow + "→/:": 8,
	}
	if got := connSeries(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// TestConnectionsBound: the server keeps contract.MaxConnectionSeries label sets and one
// overflow series, however many sources a node's pods show.
func TestConnectionsBound(t *testing.T) {
	s, _, reg := newLoggedServer(t)
	srcs := fakeSources{}
	s.SetSources(srcs)
	const extra = 10
	for i := range contract.MaxConnectionSeries + extra {
		ip := netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})
		if i > 0 { // the first is no pod's: its label set is the unknown one
			srcs[ip] = Source{Namespace: "a", Pod: fmt.Sprintf("p%d", i), Workload: fmt.Sprintf("w%d", i)}
		}
		s.connected(connEntry(ip, "10.96.0.10:80", accesslogdatav3.AccessLogType_TcpUpstreamConnected))
	}
	got := connSeries(t, reg)
	if len(got) != contract.MaxConnectionSeries+1 {
		t.Fatalf("%d series, want %d and the overflow", len(got), contract.MaxConnectionSeries)
	}
	if n := got["/"+contract.SourceOverflow+"→/:"]; n != extra {
		t.Errorf("overflow counted %v, want %d", n, extra)
	}
	if n := got["/"+contract.SourceUnknown+"→ns/web:80"]; n != 1 {
		t.Errorf("unknown source counted %v, want 1", n)
	}
}

// TestRefusalLineSourcePod: the refusal line names the pod of its source address, or none.
func TestRefusalLineSourcePod(t *testing.T) {
	s, buf, _ := newLoggedServer(t)
	s.SetSources(fakeSources{clientA: {Namespace: "a", Pod: "client-7d9f-x1", Workload: "client"}})
	for _, src := range []netip.Addr{clientA, clientB} {
		s.record(Refusal{Reason: contract.ReasonNoEndpoints, Service: web, Flag: "UH",
			Destination: netip.MustParseAddrPort("10.96.0.10:80"), Source: netip.AddrPortFrom(src, 40000)})
	}
	out := buf.String()
	for _, want := range []string{`"source":"10.244.0.5:40000","source_pod":"a/client-7d9f-x1"`, `"source":"10.244.0.6:40000","source_pod":""`} {
		if !strings.Contains(out, want) {
			t.Errorf("no refusal line with %s in:\n%s", want, out)
		}
	}
}
