package xdsserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/svclb/pkg/contract"
)

func nodeLocalEntry(src, dst string, port uint32) *accesslogdatav3.TCPAccessLogEntry {
	sock := func(a string, p uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: a, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: p}}}}
	}
	return &accesslogdatav3.TCPAccessLogEntry{CommonProperties: &accesslogdatav3.AccessLogCommon{
		DownstreamRemoteAddress: sock(src, 40000), DownstreamLocalAddress: sock(dst, port),
		ResponseFlags: &accesslogdatav3.ResponseFlags{NoHealthyUpstream: true},
		CustomTags:    map[string]string{contract.TagPod: "ns/hostile"},
	}}
}

// TestALSNodeLocal: entries of the node-local log are counted as node-local refusals, not as
// refusals of the Service range, whatever their response flags.
func TestALSNodeLocal(t *testing.T) {
	s, conn, _ := start(t, testIndex())
	st, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	msg := func(id bool, es ...*accesslogdatav3.TCPAccessLogEntry) *accesslogv3.StreamAccessLogsMessage {
		m := &accesslogv3.StreamAccessLogsMessage{LogEntries: &accesslogv3.StreamAccessLogsMessage_TcpLogs{
			TcpLogs: &accesslogv3.StreamAccessLogsMessage_TCPAccessLogEntries{LogEntry: es}}}
		if id {
			m.Identifier = &accesslogv3.StreamAccessLogsMessage_Identifier{LogName: contract.NodeLocalLogName}
		}
		return m
	}
	// The identifier comes on the first message only: the second is of the same log.
	for _, m := range []*accesslogv3.StreamAccessLogsMessage{
		msg(true, nodeLocalEntry("127.0.0.1", "127.0.0.1", 9901), nodeLocalEntry("10.244.1.5", "172.18.0.3", 10250)),
		msg(false, nodeLocalEntry("10.244.1.5", "10.96.0.10", 80)),
	} {
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.nodeLocal.refused); got != 3 {
		t.Errorf("%s = %v, want 3", contract.MetricNodeLocalRefused, got)
	}
	if n := testutil.CollectAndCount(s.refused); n != 0 {
		t.Errorf("%d series of %s, want none: node-local refusals are not the Service range's", n, contract.MetricSvcRefused)
	}
}

// TestNodeLocalLogIsBounded: a burst is logged line by line, with the pod and destination;
// past it the refusals are counted, and the first line allowed again says how many were not
// logged.
func TestNodeLocalLogIsBounded(t *testing.T) {
	var buf bytes.Buffer
	n := newNodeLocal(slog.New(slog.NewJSONHandler(&buf, nil)))
	now := time.Unix(1000, 0)
	n.now = func() time.Time { return now }
	for range contract.NodeLocalLogBurst + 5 {
		n.record(nodeLocalEntry("127.0.0.1", "127.0.0.1", 9901))
	}
	now = now.Add(contract.NodeLocalLogEvery)
	n.record(nodeLocalEntry("10.244.1.5", "169.254.169.254", 80))

	type line struct {
		Msg, Reason, Pod, Destination, Source string
		Suppressed                            int64
	}
	var lines []line
	for _, b := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		lines = append(lines, l)
	}
	if len(lines) != contract.NodeLocalLogBurst+1 {
		t.Fatalf("%d lines, want %d", len(lines), contract.NodeLocalLogBurst+1)
	}
	first, last := lines[0], lines[len(lines)-1]
	if first.Msg != contract.LogRefusal || first.Reason != contract.ReasonNodeLocal || first.Pod != "ns/hostile" ||
		first.Destination != "127.0.0.1:9901" || first.Source != "127.0.0.1:40000" || first.Suppressed != 0 {
		t.Errorf("first line %+v", first)
	}
	if last.Destination != "169.254.169.254:80" || last.Suppressed != 5 {
		t.Errorf("line after the burst %+v, want 169.254.169.254:80 with 5 suppressed", last)
	}
	if got := testutil.ToFloat64(n.refused); got != contract.NodeLocalLogBurst+6 {
		t.Errorf("counted %v, want %d", got, contract.NodeLocalLogBurst+6)
	}
}
