package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The retry-blackhole leg's dialling: blackholeBefore connections one after the other, in which
// round robin over 3 hosts meets the blackholed one about every third host choice until its
// contract.OutlierConsecutiveFailures connect timeouts eject it, then blackholeAfter more.
//
// What can fail by chance. Green: nothing. A connection that meets the blackholed host waits
// out one connect_timeout (contract.SvcConnectTimeout) and is retried on the next host round
// robin picks, an open one, so it costs its caller one connect_timeout and never two; the
// client's attempt timeout (workload.AttemptTimeout) is longer than that. A connection placed
// while the ejection is posted may still meet the host: retrySlack more. Red: the Service is
// cut, nothing replies.
const (
	blackholeBefore = 24
	blackholeAfter  = 20
	// blackholeSlow is the attempt time that says a connection met the blackholed host: half
	// the connect timeout, far above an open host's milliseconds.
	blackholeSlow = contract.SvcConnectTimeout / 2
	// blackholeMargin is what a slow connection may take beyond one connect timeout: the retry
	// on an open host and a loaded node.
	blackholeMargin = time.Second
)

// retry-blackhole: a Ready endpoint that drops SYNs (its node gone, a partition) costs a caller
// one connect_timeout, once per connection: the proxy retries the attempt on another host, and
// outlier detection ejects the endpoint after the configured timeouts.
var _ = leg.Define(legs, leg.Leg[*retryWorkload]{
	Name:      "retry-blackhole",
	Needs:     leg.Needs{Workers: 1},
	Early:     true,
	Workloads: "Service rblack (3 Ready echo pods, one, rblack-dark, dropping every TCP packet to its port 8080 in its netns; cut); the client on the first worker",
	Exercises: "internal/translate/cluster.go (connect_timeout, outlier_detection), internal/translate/listener.go (max_connect_attempts), " +
		"nodeproxy/proxy.go (connect: an expired connect is UF, upstream_cx_connect_timeout, a local-origin failure for outlier detection, then the next host)",
	Setup: "ClusterIP Service rblack over 3 Ready echo pods; rblack-dark's init container (NET_ADMIN in its netns) drops TCP to 8080 (echo.Blackhole), " +
		"its readiness on 8081 passes; kube-proxy ClusterIP entries cut on every node; one meshed client on the first worker dials one connection after the other",
	RedExpect: "no backend reply: passthrough to the VIP hits kube-proxy's REJECT (the Service is cut), the proxy closes every connection",
	GreenMeans: fmt.Sprintf("all %d connections reach an open backend; each takes at most one connect_timeout (%s) + %s; the slow ones (over %s) number the consecutive_local_origin_failure threshold (%d, up to %d more), "+
		"as does cluster.<alt_stat_name>.upstream_cx_connect_timeout; outlier_detection.ejections_enforced_consecutive_local_origin_failure rises by 1 and none of the last %d is slow",
		blackholeBefore+blackholeAfter, contract.SvcConnectTimeout, blackholeMargin, blackholeSlow, contract.OutlierConsecutiveFailures, retrySlack, blackholeAfter),
	Chance:  fmt.Sprintf("green: none (a connection meets the dark host at most once: the retry goes to the next host of the round robin); red: none (the Service is cut); each attempt %s", workload.AttemptTimeout),
	Timeout: 6 * time.Minute,
	Prepare: func(ctx context.Context) (*retryWorkload, error) {
		return prepareRetry(ctx, "rblack", "rblack-dark", workload.EchoPodOptions{Blackholed: true})
	},
	Services: func(w *retryWorkload) []measure.Dialled {
		d := measure.ServicePort(w.svc, 80)
		d.UpstreamFailures = true // the dark endpoint's connect timeouts are not refusals
		return []measure.Dialled{d}
	},
	Measure: func(ctx context.Context, w *retryWorkload, run *evidence.Run) {
		if err := measureBlackhole(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

func measureBlackhole(ctx context.Context, w *retryWorkload, run *evidence.Run) error {
	node := w.client.Spec.NodeName
	timeouts := proxy.ClusterStat(w.stat, "upstream_cx_connect_timeout")
	enforced := proxy.ClusterStat(w.stat, "outlier_detection.ejections_enforced_consecutive_local_origin_failure")
	before, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	first, err := dialStage(ctx, w, run, "with the dark endpoint in rotation", blackholeBefore, 0)
	if err != nil {
		return err
	}
	next, err := dialStage(ctx, w, run, "after its ejection", blackholeAfter, 0)
	if err != nil {
		return err
	}
	after, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	slow := func(rs []echo.Result) (n int, over bool) {
		limit := float64((contract.SvcConnectTimeout + blackholeMargin).Milliseconds())
		for _, r := range rs {
			if r.Reply != nil && r.Millis > float64(blackholeSlow.Milliseconds()) {
				n++
			}
			over = over || r.Millis > limit
		}
		return n, over
	}
	slowFirst, overFirst := slow(first)
	slowNext, overNext := slow(next)
	dTimeouts, dEnforced := after[timeouts]-before[timeouts], after[enforced]-before[enforced]
	run.Counters = map[string]float64{timeouts + " on " + node: float64(dTimeouts), enforced + " on " + node: float64(dEnforced)}
	mFirst, mNext := meanMillis(first), meanMillis(next)
	if mFirst > 0 && mNext > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("caller latency: mean %.1f ms (max %.1f) with the dark endpoint in rotation, %.2f ms (max %.2f) after its ejection: ratio %.1f",
			mFirst, maxMillis(first), mNext, maxMillis(next), mFirst/mNext))
	}
	threshold := contract.OutlierConsecutiveFailures
	failed := len(first) + len(next) - echo.Replies(first) - echo.Replies(next)
	run.MetGreen = len(first) == blackholeBefore && len(next) == blackholeAfter && failed == 0 && !overFirst && !overNext &&
		slowFirst >= threshold && slowFirst <= threshold+retrySlack && slowNext == 0 &&
		dTimeouts == int64(slowFirst) && dEnforced == 1
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && run.ProxyClosed == run.Attempts
	run.Summary = fmt.Sprintf("%s; failed %d; slow (over %s) %d of %d then %d of %d, any over one connect_timeout + %s: %v; the proxy: upstream_cx_connect_timeout %+d, ejections_enforced_consecutive_local_origin_failure %+d",
		run.Counts(), failed, blackholeSlow, slowFirst, len(first), slowNext, len(next), blackholeMargin, overFirst || overNext, dTimeouts, dEnforced)
	return nil
}
