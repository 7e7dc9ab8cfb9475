package xdsserver

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/internal/ratelog"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// refusalLog bounds the refusal lines (contract.LogRefusal), one per refused connection, per
// reason and source pod (contract.RefusalLogBurst, then contract.RefusalLogPerSecond) and for
// all of them (contract.RefusalLogTotalPerSecond): a pod that scans the Service range would
// otherwise write a line per dial. The lines held back are counted (MetricLogSuppressed) and
// summarised every contract.LogSummaryInterval, one line per reason and pod.
type refusalLog struct {
	log        *slog.Logger
	suppressed prometheus.Counter
	gate       *ratelog.Keyed[refusalKey]
}

// refusalKey is a reason and a source pod (the address without its port: each connection
// has its own port).
type refusalKey struct {
	reason string
	source netip.Addr
}

func newRefusalLog(log *slog.Logger, suppressed prometheus.Counter) refusalLog {
	return refusalLog{log: log, suppressed: suppressed, gate: &ratelog.Keyed[refusalKey]{
		Limit: ratelog.Limit{Burst: contract.RefusalLogBurst, Every: time.Second / contract.RefusalLogPerSecond},
		Total: ratelog.Limit{Burst: 4 * contract.RefusalLogTotalPerSecond, Every: time.Second / contract.RefusalLogTotalPerSecond},
	}}
}

// allow reports whether r's line may be written now.
func (l refusalLog) allow(r Refusal, now time.Time) bool {
	if l.gate.Allow(refusalKey{r.Reason, r.Source.Addr()}, now) {
		return true
	}
	l.suppressed.Inc()
	return false
}

// summarise writes one line per reason and pod whose lines were held back since the last.
func (l refusalLog) summarise(now time.Time) {
	for _, s := range l.gate.Flush(now) {
		src := ""
		if s.Key.source.IsValid() {
			src = s.Key.source.String()
		}
		l.log.Info(contract.LogSuppressed, contract.LogKeyReason, s.Key.reason, contract.LogKeySource, src,
			contract.LogKeySuppressed, s.N)
	}
}

func (l refusalLog) run(ctx context.Context) {
	t := time.NewTicker(contract.LogSummaryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.summarise(now)
		}
	}
}
