package xdsserver

import (
	"log/slog"
	"sync"
	"time"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// nodeLocal counts and logs the connections the capture listeners' cap_refused chain closed,
// reported on the access log contract.NodeLocalLogName. A pod drives them, so the lines are
// bounded: a burst of contract.NodeLocalLogBurst, then one per contract.NodeLocalLogEvery; the
// refusals in between are counted, and the next line says how many it did not log.
type nodeLocal struct {
	log     *slog.Logger
	refused prometheus.Counter
	now     func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int64
}

func newNodeLocal(log *slog.Logger) *nodeLocal {
	return &nodeLocal{log: log, now: time.Now, tokens: contract.NodeLocalLogBurst,
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: contract.MetricNodeLocalRefused,
			Help: "Captured connections to node-local destinations (the node's loopback, link-local, multicast and own addresses) the node proxy refused.",
		})}
}

// allow takes a token of the log's bucket; false (and one more suppressed) when none is left.
func (n *nodeLocal) allow() (suppressed int64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	if !n.last.IsZero() {
		n.tokens = min(contract.NodeLocalLogBurst, n.tokens+now.Sub(n.last).Seconds()/contract.NodeLocalLogEvery.Seconds())
	}
	n.last = now
	if n.tokens < 1 {
		n.suppressed++
		return 0, false
	}
	n.tokens--
	suppressed, n.suppressed = n.suppressed, 0
	return suppressed, true
}

// record counts one entry and logs it if the bucket allows.
func (n *nodeLocal) record(e *accesslogdatav3.TCPAccessLogEntry) {
	n.refused.Inc()
	suppressed, ok := n.allow()
	if !ok {
		return
	}
	cp := e.GetCommonProperties()
	dst, _ := addrPort(cp.GetDownstreamLocalAddress())
	src, _ := addrPort(cp.GetDownstreamRemoteAddress())
	n.log.Info(contract.LogRefusal, contract.LogKeyReason, contract.ReasonNodeLocal, contract.LogKeyPod, cp.GetCustomTags()[contract.TagPod],
		contract.LogKeyDestination, dst.String(), contract.LogKeySource, src.String(), contract.LogKeySuppressed, suppressed)
}
