// The refusal log: on-demand refusals summed into one line per reason, rate-limited.

package agent

import (
	"time"

	"github.com/aether-mesh/svclb/internal/ratelog"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// refusalLog sums refusals into one log line per reason, so a scan of the Service range costs
// a few lines, not one per name (each name is logged at debug level). A reason's line is
// written at the end of a sync while its limit (contract.OnDemandRefusalLogBurst, then one
// per contract.OnDemandRefusalLogEvery) allows; otherwise its sum grows until the next line,
// which counts every name since the last one.
type refusalLog map[string]*refusalSum

type refusalSum struct {
	n        int
	examples []string
}

const refusalExamples = 3

// refusalLimit is the limit of each reason's line.
var refusalLimit = ratelog.Limit{Burst: contract.OnDemandRefusalLogBurst, Every: contract.OnDemandRefusalLogEvery}

func (r refusalLog) add(name, reason string) {
	sum := r[reason]
	if sum == nil {
		sum = &refusalSum{}
		r[reason] = sum
	}
	sum.n++
	if len(sum.examples) < refusalExamples {
		sum.examples = append(sum.examples, name)
	}
}

// flushRefusals writes the lines the limit allows; d.mu is held. What it holds back is
// counted in contract.MetricLogSuppressed and written by a later sync, which it asks for.
func (s *syncer) flushRefusals() {
	d := s.demand
	now := s.clock.Now()
	held := false
	for reason, sum := range d.refusals {
		if !s.refusalGate.Allow(reason, now) {
			s.m.logSuppressed.Inc()
			held = true
			continue
		}
		s.log.Info("on-demand cluster names refused", "reason", reason, "count", sum.n, "examples", sum.examples)
		delete(d.refusals, reason)
	}
	s.refusalGate.Flush(now) // forgets idle reasons; the counts live in d.refusals
	if held && s.refusalWake == nil {
		s.refusalWake = time.AfterFunc(contract.OnDemandRefusalLogEvery, func() {
			s.demand.mu.Lock()
			s.refusalWake = nil
			s.demand.mu.Unlock()
			s.signal()
		})
	}
}
