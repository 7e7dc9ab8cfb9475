package xdsserver

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// syncBuffer is a bytes.Buffer a logger and the test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines counts the lines whose msg is msg.
func (s *syncBuffer) lines(msg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), `"msg":"`+msg+`"`)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newLoggedServer(t *testing.T) (*Server, *syncBuffer, *prometheus.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	buf := &syncBuffer{}
	reg := prometheus.NewRegistry()
	s, err := New(ctx, testIndex(), reg, slog.New(slog.NewJSONHandler(buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, buf, reg
}

func gathered(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// TestRefusalLogFloodRateLimited: a pod that scans the range (10,000 refused connections at
// once) gets a burst of refusal lines, not one per connection; every refusal is still
// counted; the lines held back are counted; another pod's refusal is still logged.
func TestRefusalLogFloodRateLimited(t *testing.T) {
	s, buf, reg := newLoggedServer(t)
	const flood = 10000
	for i := range flood {
		s.record(Refusal{Reason: contract.ReasonNoService, Flag: "NC", Source: netip.AddrPortFrom(netip.MustParseAddr("10.244.1.3"), uint16(30000+i%30000)),
			Destination: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80)})
	}
	logged := buf.lines(contract.LogRefusal)
	if logged > 2*contract.RefusalLogBurst {
		t.Fatalf("%d refused connections from one pod wrote %d refusal lines, want at most about the burst %d", flood, logged, contract.RefusalLogBurst)
	}
	if got := gathered(t, reg, contract.MetricSvcRefused, contract.LabelReason, contract.ReasonNoService); got != flood {
		t.Fatalf("refusals counted %v, want %d", got, flood)
	}
	if got := gathered(t, reg, contract.MetricLogSuppressed, contract.LabelLog, contract.LogNameRefusal); got != float64(flood-logged) {
		t.Fatalf("suppressed lines counted %v, want %d", got, flood-logged)
	}
	s.record(Refusal{Reason: contract.ReasonNoService, Flag: "NC", Source: netip.MustParseAddrPort("10.244.1.4:40000"),
		Destination: netip.MustParseAddrPort("10.96.0.99:80")})
	if !strings.Contains(buf.String(), `"source":"10.244.1.4:40000"`) {
		t.Fatal("another pod's refusal was held back by the flood")
	}
}

// TestRefusalLogSummary: the lines held back are reported per reason and pod, then forgotten.
func TestRefusalLogSummary(t *testing.T) {
	s, buf, _ := newLoggedServer(t)
	for i := range 1000 {
		s.record(Refusal{Reason: contract.ReasonNoService, Flag: "NC", Source: netip.AddrPortFrom(netip.MustParseAddr("10.244.1.3"), uint16(30000+i))})
	}
	logged := buf.lines(contract.LogRefusal)
	s.refusalLog.summarise(time.Now())
	want := `"msg":"` + contract.LogSuppressed + `","reason":"no-service","source":"10.244.1.3","suppressed":` + itoa(1000-logged) + `}`
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("no summary %s in:\n%s", want, buf.String()[max(0, len(buf.String())-600):])
	}
	n := buf.lines(contract.LogSuppressed)
	s.refusalLog.summarise(time.Now())
	if buf.lines(contract.LogSuppressed) != n {
		t.Fatal("a second summary repeated the first")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
