package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The retry leg's dialling: retryBefore connections at retryInterval, in
// which round robin over 3 hosts meets the closed one about every other
// connection until its contract.OutlierConsecutiveFailures failed attempts
// eject it, then retryAfter more with the closed endpoint ejected.
//
// What can fail by chance. Green: nothing, if the proxy retries: every
// failed attempt is retried (max_connect_attempts 3) on the next host round
// robin picks, one of the two open ones, so a caller's connection fails only
// if all 3 attempts meet the closed host, which round robin over 3 never
// does. Envoy ejects on its main thread, posted from the worker that saw
// the 5th failure, so a connection placed meanwhile may still try the host:
// the failed attempts may exceed the threshold by retrySlack. Red: kube-proxy
// is cut, so nothing replies.
const (
	retryBefore   = 30
	retryAfter    = 20
	retryInterval = 50 * time.Millisecond
	retrySlack    = 2
)

type retryWorkload struct {
	svc    *corev1.Service
	to     string // its port 80
	client *corev1.Pod
	// closed is the backend pod that stays Ready with the Service's port closed.
	closed string
	// stat is the svc: cluster's alt_stat_name.
	stat string
}

// retry: a Ready endpoint that refuses connections fails no caller's
// connection: the proxy retries each failed attempt on another host, and
// outlier detection ejects the endpoint after the configured failures.
var _ = leg.Define(legs, leg.Leg[*retryWorkload]{
	Name:      "retry",
	Needs:     leg.Needs{Workers: 1},
	Early:     true,
	Workloads: "Service retry (3 Ready echo pods, one with the targetPort closed; cut); the client on the first worker",
	Exercises: "internal/translate/listener.go (cap_svc max_connect_attempts), internal/translate/cluster.go (connect_timeout, outlier_detection), " +
		"pkg/contract/upstream.go, nodeproxy/proxy.go (connect: a cluster lookup and a host per attempt, UF then URX)",
	Setup: "ClusterIP Service retry over 3 Ready echo pods, one of which (retry-closed) listens on another port than the Service's targetPort 8080 " +
		"(readiness on its health port passes); kube-proxy ClusterIP entries cut on every node; one meshed client on the first worker",
	RedExpect: "no backend reply: passthrough to the VIP hits kube-proxy's REJECT (the Service is cut), the proxy closes every connection",
	GreenMeans: fmt.Sprintf("all %d connections reach an open backend, none fails, while the proxy on the client's node tried the closed endpoint: "+
		"cluster.<alt_stat_name>.upstream_cx_connect_fail rises by the consecutive_local_origin_failure threshold (%d, up to %d more), "+
		"upstream_cx_connect_attempts_exceeded by 0 (no connection ran out of attempts), and outlier_detection.ejections_enforced_consecutive_local_origin_failure by 1",
		retryBefore+retryAfter, contract.OutlierConsecutiveFailures, retrySlack),
	Chance: fmt.Sprintf("green: none (a connection fails only if all %d attempts meet the closed host, which round robin over 3 hosts never does; "+
		"the failures before the ejection may exceed the threshold by %d, an ejection posted from the worker that saw the 5th racing a connection being placed); "+
		"red: none (the Service is cut); each attempt %s", contract.SvcMaxConnectAttempts, retrySlack, workload.AttemptTimeout),
	Timeout: 6 * time.Minute,
	Prepare: func(ctx context.Context) (*retryWorkload, error) {
		// Ready through its health port, nothing on the Service's targetPort.
		return prepareRetry(ctx, "retry", "retry-closed", workload.EchoPodOptions{Port: workload.EchoPort + 10, PortName: "elsewhere"})
	},
	Services: func(w *retryWorkload) []measure.Dialled {
		d := measure.ServicePort(w.svc, 80)
		d.UpstreamFailures = true // the closed port's connect failures are not refusals
		return []measure.Dialled{d}
	},
	Measure: func(ctx context.Context, w *retryWorkload, run *evidence.Run) {
		if err := measureRetry(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// prepareRetry creates Service app over two echo pods and the pod odd, shaped by oddOpts, all
// Ready, cut, with one meshed client on the first worker.
func prepareRetry(ctx context.Context, app, odd string, oddOpts workload.EchoPodOptions) (*retryWorkload, error) {
	ns := suite.legsNS
	node := suite.cluster.Workers()[0].Name
	w := &retryWorkload{client: suite.clientOn(node), closed: odd}
	if w.client == nil {
		return nil, fmt.Errorf("no meshed client on %s", node)
	}
	pods := []*corev1.Pod{
		workload.EchoPod(ns, app+"-0", app, workload.EchoPodOptions{}),
		workload.EchoPod(ns, app+"-1", app, workload.EchoPodOptions{}),
		workload.EchoPod(ns, odd, app, oddOpts),
	}
	svc := workload.Service(ns, app, workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: app}, Cut: true})
	if err := suite.cluster.Create(ctx, pods[0], pods[1], pods[2], svc); err != nil {
		return nil, err
	}
	ready, err := suite.cluster.WaitPodsReady(ctx, ns, workload.AppLabel+"="+app, len(pods), 2*time.Minute)
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for _, p := range ready {
		want[p.Name] = workload.EndpointReady
	}
	if err := workload.WaitEndpoints(ctx, suite.cluster, ns, svc.Name, want); err != nil {
		return nil, err
	}
	// Red is the control: kube-proxy's entries of the Service must be gone first.
	if _, err := guard.WaitCut(ctx, suite.cluster, svc, time.Minute); err != nil {
		return nil, err
	}
	w.svc, w.to = svc, workload.Addr(svc, 80)
	w.stat = contract.StatName(ns, svc.Name, 80)
	return w, nil
}

// dialStage makes n attempts of w's client at interval and records them in run under stage.
func dialStage(ctx context.Context, w *retryWorkload, run *evidence.Run, stage string, n int, interval time.Duration) ([]echo.Result, error) {
	start := time.Since(run.Started)
	o := workload.DialOptions{Count: n, Interval: interval, Timeout: workload.AttemptTimeout}
	rs, err := workload.Dial(ctx, suite.cluster, w.client, w.to, o)
	if err != nil {
		return nil, err
	}
	run.Tally(rs, suite.cluster.Zone)
	for i, r := range rs {
		s := evidence.Sample{At: start + time.Duration(i)*o.Interval, Stage: stage, Outcome: echo.Outcome(r)}
		if r.Reply != nil {
			s.Backend = evidence.BackendKey(r.Reply, suite.cluster.Zone)
		}
		run.Timeline = append(run.Timeline, s)
	}
	return rs, nil
}

func measureRetry(ctx context.Context, w *retryWorkload, run *evidence.Run) error {
	node := w.client.Spec.NodeName
	fail := proxy.ClusterStat(w.stat, proxy.UpstreamCxConnectFail)
	exceeded := proxy.ClusterStat(w.stat, proxy.UpstreamCxConnectAttemptsExceeded)
	enforced := proxy.ClusterStat(w.stat, "outlier_detection.ejections_enforced_consecutive_local_origin_failure")
	before, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	first, err := dialStage(ctx, w, run, "with the closed endpoint in rotation", retryBefore, retryInterval)
	if err != nil {
		return err
	}
	mid, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	next, err := dialStage(ctx, w, run, "after its ejection", retryAfter, retryInterval)
	if err != nil {
		return err
	}
	after, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}

	failedFirst, failedNext := len(first)-echo.Replies(first), len(next)-echo.Replies(next)
	backends := map[string]bool{}
	for _, r := range append(slices.Clone(first), next...) {
		if r.Reply != nil {
			backends[r.Reply.Pod] = true
		}
	}
	dFail, dExceeded, dEnforced := after[fail]-before[fail], after[exceeded]-before[exceeded], after[enforced]-before[enforced]
	ejectedFirst := mid[enforced] > before[enforced]
	run.Counters = map[string]float64{
		fail + " on " + node: float64(dFail), exceeded + " on " + node: float64(dExceeded), enforced + " on " + node: float64(dEnforced),
	}
	if _, served := after[exceeded]; !served {
		run.Notes = append(run.Notes, fmt.Sprintf("%s is not served by the proxy on %s", exceeded, node))
	}
	// The caller's cost of the closed endpoint: the replied attempts' mean
	// time while it is in rotation (some of them retried) over the mean once
	// it is ejected.
	mFirst, mNext := meanMillis(first), meanMillis(next)
	if mFirst > 0 && mNext > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("caller latency: mean %.2f ms (max %.2f) with the closed endpoint in rotation, %.2f ms (max %.2f) after its ejection: ratio %.2f",
			mFirst, maxMillis(first), mNext, maxMillis(next), mFirst/mNext))
	}
	threshold := int64(contract.OutlierConsecutiveFailures)
	run.MetGreen = len(first) == retryBefore && len(next) == retryAfter && failedFirst == 0 && failedNext == 0 &&
		dFail >= threshold && dFail <= threshold+retrySlack && dExceeded == 0 && dEnforced == 1 && ejectedFirst &&
		len(backends) == 2 && !backends[w.closed]
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && run.ProxyClosed == run.Attempts
	run.Summary = fmt.Sprintf("%s; failed %d of %d then %d of %d connections; the proxy: upstream_cx_connect_fail %+d, upstream_cx_connect_attempts_exceeded %+d, "+
		"ejections_enforced_consecutive_local_origin_failure %+d (ejected within the first %d: %v); replies from %v",
		run.Counts(), failedFirst, len(first), failedNext, len(next), dFail, dExceeded, dEnforced, retryBefore, ejectedFirst, slices.Sorted(maps.Keys(backends)))
	return nil
}

// meanMillis is the mean time of the replied attempts of rs (0: none).
func meanMillis(rs []echo.Result) float64 {
	var sum float64
	n := 0
	for _, r := range rs {
		if r.Reply != nil {
			sum += r.Millis
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// maxMillis is the longest replied attempt of rs.
func maxMillis(rs []echo.Result) float64 {
	var m float64
	for _, r := range rs {
		if r.Reply != nil {
			m = max(m, r.Millis)
		}
	}
	return m
}
