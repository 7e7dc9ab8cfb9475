package ratelog

import (
	"sync"
	"time"
)

// Limit is a token bucket: Burst events at once, then one every Every.
type Limit struct {
	Burst int
	Every time.Duration
}

// Gate is one token bucket, full at the first event. The zero value is ready to use.
type Gate struct {
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	started    bool
	suppressed int64
}

// Allow takes a token at now under lim. ok is false when the event is over the limit (it is
// counted); when ok, suppressed is how many events were over it since the last allowed one,
// for the caller to report with this line.
func (g *Gate) Allow(now time.Time, lim Limit) (suppressed int64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.allowLocked(now, lim) {
		g.suppressed++
		return 0, false
	}
	suppressed, g.suppressed = g.suppressed, 0
	return suppressed, true
}

// allowLocked refills the bucket up to now and takes a token if there is one.
func (g *Gate) allowLocked(now time.Time, lim Limit) bool {
	burst := float64(max(lim.Burst, 1))
	switch {
	case !g.started:
		g.started, g.tokens = true, burst
	case lim.Every > 0 && now.After(g.last):
		g.tokens = min(burst, g.tokens+float64(now.Sub(g.last))/float64(lim.Every))
	}
	g.last = now
	if g.tokens < 1 {
		return false
	}
	g.tokens--
	return true
}
