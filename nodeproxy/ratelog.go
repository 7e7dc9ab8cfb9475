package nodeproxy

import (
	"time"

	"github.com/aether-mesh/svclb/internal/ratelog"
)

// rateLog lets a repeated event log one line per interval that counts the
// events since the last line: a flood (connections over the limit, a failing
// accept) must not log one line per event. It is internal/ratelog's Gate with
// a burst of one.
type rateLog struct {
	interval time.Duration
	gate     ratelog.Gate
}

// note counts one event at now. It returns the events to report, this one
// included, and true when a line is due: at the first event, and at the first
// one an interval after the last line.
func (r *rateLog) note(now time.Time) (int64, bool) {
	n, ok := r.gate.Allow(now, ratelog.Limit{Burst: 1, Every: r.interval})
	return n + 1, ok
}
