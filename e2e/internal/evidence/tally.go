package evidence

import (
	"fmt"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// Tally adds dial results to the run's counts and backend distribution.
// zone names a node's zone, for replies whose backend did not report one.
func (r *Run) Tally(rs []echo.Result, zone func(node string) string) {
	if r.Backends == nil {
		r.Backends = map[string]int{}
	}
	for _, res := range rs {
		r.Attempts++
		switch echo.Outcome(res) {
		case echo.OutcomeReply:
			r.Replies++
			r.Backends[BackendKey(res.Reply, zone)]++
		case echo.OutcomeHostRefused:
			r.HostRefused++
		case echo.OutcomeProxyClosed:
			r.ProxyClosed++
		case echo.OutcomeTimeout:
			r.Timeouts++
		default:
			r.OtherErrors++
		}
	}
}

// BackendKey names a backend in distributions and timelines: pod@node/zone.
func BackendKey(rep *echo.Reply, zone func(node string) string) string {
	z := rep.Zone
	if z == "" {
		z = zone(rep.Node)
	}
	return fmt.Sprintf("%s@%s/%s", rep.Pod, rep.Node, z)
}

// Counts is the run's counts as one line: replies of attempts, then each
// kind of failure seen.
func (r *Run) Counts() string {
	s := fmt.Sprintf("%d/%d replies", r.Replies, r.Attempts)
	for _, c := range []struct {
		n    int
		what string
	}{{r.ProxyClosed, "proxy-closed"}, {r.HostRefused, "ECONNREFUSED"}, {r.Timeouts, "timeouts"}, {r.OtherErrors, "other errors"}} {
		if c.n > 0 {
			s += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return s
}
