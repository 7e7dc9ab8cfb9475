package xdsserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// Connection log load: benchPods pods on the node dial benchServices Service ports, so
// benchPods × benchServices label sets (under contract.MaxConnectionSeries), in messages of
// benchBatch entries, about what Envoy's default 16 KiB buffer holds of them.
const (
	benchPods     = 64
	benchServices = 32
	benchBatch    = 128
)

// BenchmarkALSConnections feeds connected entries through the real gRPC ALS handler over a
// unix socket, as the node proxy sends them, and reports the entries per second the agent
// takes and the process CPU per entry. The messages are encoded once (grpc.PreparedMsg), so
// the CPU is the server's decode, lookup and count plus the client's transport writes: run
// with GOMAXPROCS=1 for one core.
func BenchmarkALSConnections(b *testing.B) {
	idx := fakeIndex{}
	srcs := fakeSources{}
	for i := range benchServices {
		idx[netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, 1, byte(i)}), 80)] = svcindex.Result{Class: svcindex.Known,
			Service: k8stypes.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)}}
	}
	for i := range benchPods {
		srcs[netip.AddrFrom4([4]byte{10, 244, 0, byte(i)})] = Source{Namespace: "app", Pod: fmt.Sprintf("w%d-abc", i), Workload: fmt.Sprintf("w%d", i)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := New(ctx, idx, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	s.SetSources(srcs)
	l, err := Listen(filepath.Join(b.TempDir(), "xds.sock"))
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(l) }()
	defer g.Stop()
	conn, err := grpc.NewClient("unix://"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	st, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Send(&accesslogv3.StreamAccessLogsMessage{Identifier: &accesslogv3.StreamAccessLogsMessage_Identifier{LogName: contract.ConnectionLogName}}); err != nil {
		b.Fatal(err)
	}
	// A handful of different messages, every label set in them.
	var msgs []*grpc.PreparedMsg
	for m := range benchPods * benchServices / benchBatch {
		es := make([]*accesslogdatav3.TCPAccessLogEntry, benchBatch)
		for i := range es {
			k := m*benchBatch + i
			es[i] = connEntry(netip.AddrFrom4([4]byte{10, 244, 0, byte(k % benchPods)}),
				fmt.Sprintf("10.96.1.%d:80", k/benchPods%benchServices), accesslogdatav3.AccessLogType_TcpUpstreamConnected)
		}
		pm := &grpc.PreparedMsg{}
		if err := pm.Encode(st, &accesslogv3.StreamAccessLogsMessage{LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{
			TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{LogEntry: es}}}); err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, pm)
	}
	n := max(1, b.N/benchBatch)
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	b.ResetTimer()
	for i := range n {
		if err := st.SendMsg(msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
	}
	// The server answers once it has read, and counted, everything sent.
	if _, err := st.CloseAndRecv(); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	entries := float64(n * benchBatch)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(entries/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/entries, "cpu-ns/entry")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cores")
	var total float64
	for _, c := range s.connections.series {
		total += testutil.ToFloat64(c)
	}
	if total != entries {
		b.Fatalf("counted %v connections of %v entries", total, entries)
	}
}
