package traffic

import (
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// from is whether r is a reply from pod.
func from(r echo.Timed, pod string) bool { return r.OK && r.Reply != nil && r.Reply.Pod == pod }

// FirstReply is the start of the earliest attempt started at or after since
// that got a reply from pod.
func FirstReply(rs []echo.Timed, pod string, since time.Time) (time.Time, bool) {
	var first time.Time
	for _, r := range rs {
		if from(r, pod) && !r.Start.Before(since) && (first.IsZero() || r.Start.Before(first)) {
			first = r.Start
		}
	}
	return first, !first.IsZero()
}

// FirstAnyReply is the start of the earliest attempt started at or after
// since that got a reply from any backend.
func FirstAnyReply(rs []echo.Timed, since time.Time) (time.Time, bool) {
	var first time.Time
	for _, r := range rs {
		if r.OK && !r.Start.Before(since) && (first.IsZero() || r.Start.Before(first)) {
			first = r.Start
		}
	}
	return first, !first.IsZero()
}

// Gone says whether pod has left the client's rotation by after: at least k
// attempts started after both after and pod's last reply got replies from
// other backends. k replies in a row from the others cannot be chance while
// pod still takes a share (kube-proxy picks at random: with two endpoints,
// 2^-k). last is the start of pod's last reply (zero when it never replied).
func Gone(rs []echo.Timed, pod string, after time.Time, k int) (last time.Time, gone bool) {
	for _, r := range rs {
		if from(r, pod) && r.Start.After(last) {
			last = r.Start
		}
	}
	since := after
	if last.After(since) {
		since = last
	}
	n := 0
	for _, r := range rs {
		if r.OK && r.Reply != nil && r.Reply.Pod != pod && r.Start.After(since) {
			n++
		}
	}
	return last, n >= k
}

// Only says whether, among the attempts started after since, at least k
// replied and every reply came from pod.
func Only(rs []echo.Timed, pod string, since time.Time, k int) bool {
	n := 0
	for _, r := range rs {
		if !r.OK || !r.Start.After(since) {
			continue
		}
		if r.Reply == nil || r.Reply.Pod != pod {
			return false
		}
		n++
	}
	return n >= k
}

// Ms is d in milliseconds with microsecond precision.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
