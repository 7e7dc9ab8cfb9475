package nodeproxy

import (
	"sync"
	"time"
)

// rateLog lets a repeated event log one line per interval that counts the
// events since the last line: a flood (connections over the limit, a failing
// accept) must not log one line per event.
type rateLog struct {
	interval time.Duration
	mu       sync.Mutex
	last     time.Time
	pending  int64
}

// note counts one event at now. It returns the events to report, this one
// included, and true when a line is due: at the first event, and at the first
// one an interval after the last line.
func (r *rateLog) note(now time.Time) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending++
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		return 0, false
	}
	n := r.pending
	r.pending, r.last = 0, now
	return n, true
}
