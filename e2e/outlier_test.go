package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The outlier leg's dialling. The client dials in batches until the proxy
// reports the ejection (at most outlierBatches of outlierBatch), then
// outlierAfter more attempts that must all succeed.
//
// What can and cannot flake. Green: ROUND_ROBIN over 3 hosts sends about
// every third connect attempt to the closed port, and the proxy retries each
// failed one on the next host (max_connect_attempts 3, the retry leg), so
// the caller sees none of them; the configured 5 consecutive failures come
// within 15 connections, and the ejection lasts
// base_ejection_time (30 s, Envoy's default), far longer than the
// outlierAfter attempts take; after it no connection can fail, whatever the
// order. Envoy ejects on its main thread, posted from the worker that saw
// the 5th failure, so a connection another worker is placing at that moment
// may still pick the host: the proxy's failed attempts before the ejection
// may exceed the threshold by outlierSlack. Red: kube-proxy picks one of 3 endpoints at
// random per connection (nftables numgen), so outlierAfter attempts all
// succeed with probability (2/3)^20 ≈ 3·10⁻⁴: the red run's false-failure
// odds.
const (
	outlierBatch   = 10
	outlierBatches = 5
	outlierAfter   = 20
	outlierSlack   = 2
	// outlierDefaultThreshold is Envoy's consecutive_local_origin_failure
	// default (api/envoy/config/cluster/v3/outlier_detection.proto), used
	// when the proxy's cluster leaves it unset.
	outlierDefaultThreshold = 5
)

type outlierWorkload struct {
	svc    *corev1.Service
	to     string // its port 80
	client *corev1.Pod
	// closed is the backend pod that stays Ready with the Service's port closed.
	closed string
	// cluster and stat are the svc: cluster's name and alt_stat_name.
	cluster, stat string
}

// outlier: a Ready endpoint that refuses connections is ejected after the
// configured consecutive connect failures, and then gets no more
// connections.
var _ = leg.Define(legs, leg.Leg[*outlierWorkload]{
	Name:      "outlier",
	Needs:     leg.Needs{Workers: 1},
	Early:     true,
	Workloads: "Service outlier (3 Ready echo pods, one with the targetPort closed; not cut); the client on the first worker",
	Exercises: "internal/translate/cluster.go (outlier_detection consecutive_local_origin_failure, max_ejection_percent 99), " +
		"nodeproxy/internal/lb/outlier.go (Detector), nodeproxy/outlierstats.go, nodeproxy/proxy.go, outlier.go and eds.go",
	Setup: "ClusterIP Service outlier over 3 Ready echo pods, one of which (outlier-closed) listens on another port than the Service's targetPort 8080 " +
		"(readiness on its health port passes); kube-proxy objects left in place (red shows kube-proxy's behaviour through the passthrough); one meshed client on the first worker",
	RedExpect: fmt.Sprintf("about a third of the attempts keep failing (kube-proxy keeps picking the closed endpoint), including some of the last %d; nothing ejected", outlierAfter),
	GreenMeans: fmt.Sprintf("after the cluster's consecutive_local_origin_failure (5) failed connect attempts (cluster.<alt_stat_name>.upstream_cx_connect_fail, up to %d more; "+
		"each retried on an open backend, so the client sees no failure at all) the closed endpoint is ejected on the client's node: "+
		"cluster.<alt_stat_name>.outlier_detection.ejections_enforced_consecutive_local_origin_failure and ejections_enforced_total rise by 1 and the gauge ejections_active reads 1; "+
		"the next %d attempts all reach the two open backends", outlierSlack, outlierAfter),
	Chance: fmt.Sprintf("green: none once ejected (base_ejection_time 30 s outlasts the %d attempts; failures before it may exceed the threshold by %d: an ejection posted "+
		"from the worker that saw the 5th failure races a connection being placed); red: kube-proxy picks each of 3 endpoints at random, so %d attempts all succeed "+
		"with probability (2/3)^%d ≈ 3·10⁻⁴, red's false-failure odds; each attempt %s", outlierAfter, outlierSlack, outlierAfter, outlierAfter, workload.AttemptTimeout),
	Timeout: 6 * time.Minute,
	Prepare: func(ctx context.Context) (*outlierWorkload, error) {
		ns := suite.legsNS
		node := suite.cluster.Workers()[0].Name
		w := &outlierWorkload{client: suite.clientOn(node), closed: "outlier-closed"}
		if w.client == nil {
			return nil, fmt.Errorf("no meshed client on %s", node)
		}
		pods := []*corev1.Pod{
			workload.EchoPod(ns, "outlier-0", "outlier", workload.EchoPodOptions{}),
			workload.EchoPod(ns, "outlier-1", "outlier", workload.EchoPodOptions{}),
			// Ready through its health port, nothing on the Service's targetPort.
			workload.EchoPod(ns, w.closed, "outlier", workload.EchoPodOptions{Port: workload.EchoPort + 10, PortName: "elsewhere"}),
		}
		svc := workload.Service(ns, "outlier", workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: "outlier"}})
		if err := suite.cluster.Create(ctx, pods[0], pods[1], pods[2], svc); err != nil {
			return nil, err
		}
		ready, err := suite.cluster.WaitPodsReady(ctx, ns, workload.AppLabel+"=outlier", len(pods), 2*time.Minute)
		if err != nil {
			return nil, err
		}
		want := map[string]string{}
		var ips []string
		for _, p := range ready {
			want[p.Name] = workload.EndpointReady
			ips = append(ips, p.Status.PodIP)
		}
		if err := workload.WaitEndpoints(ctx, suite.cluster, ns, svc.Name, want); err != nil {
			return nil, err
		}
		// Red is kube-proxy's balancing: wait until the client's node has all
		// three endpoints programmed.
		if err := waitKubeProxyEndpoints(ctx, node, svc, ips, workload.EchoPort); err != nil {
			return nil, err
		}
		w.svc, w.to = svc, workload.Addr(svc, 80)
		w.cluster = contract.ClusterPrefix + w.to
		w.stat = contract.StatName(ns, svc.Name, 80)
		return w, nil
	},
	Services: func(w *outlierWorkload) []measure.Dialled {
		d := measure.ServicePort(w.svc, 80)
		d.UpstreamFailures = true // the closed port's connect failures are not refusals
		return []measure.Dialled{d}
	},
	Measure: func(ctx context.Context, w *outlierWorkload, run *evidence.Run) {
		if err := measureOutlier(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// waitKubeProxyEndpoints waits until node's kube-proxy table holds an
// endpoint of svc for every address of ips on port: v1.34's nftables mode
// has a chain "endpoint-<hash>-<ns>/<name>/tcp/<port name>__<ip>/<port>" per
// endpoint; v1.37's DNATs through a numgen map with elements "<ip> . <port>"
// (pkg/kubeproxyguard/testdata).
func waitKubeProxyEndpoints(ctx context.Context, node string, svc *corev1.Service, ips []string, port int) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		table, err := guard.KubeProxyTable(ctx, suite.cluster, node)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		objs := strings.Join(guard.KubeProxyObjects(table, svc), "\n")
		for _, ip := range ips {
			if !strings.Contains(objs, fmt.Sprintf("__%s/%d", ip, port)) && !strings.Contains(table, fmt.Sprintf(" %s . %d", ip, port)) {
				last = fmt.Sprintf("no endpoint %s of %s/%s in kube-proxy's table", ip, svc.Namespace, svc.Name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("kube-proxy on %s: %w (%s)", node, err, last)
	}
	return nil
}

// outlierStat is one of the cluster's outlier_detection stats (Envoy's
// names, source/common/upstream/outlier_detection_impl.h
// ALL_OUTLIER_DETECTION_STATS).
func (w *outlierWorkload) outlierStat(name string) string {
	return "cluster." + w.stat + ".outlier_detection." + name
}

func measureOutlier(ctx context.Context, w *outlierWorkload, run *evidence.Run) error {
	node := w.client.Spec.NodeName
	// The threshold the proxy applied, where it holds the cluster.
	threshold := outlierDefaultThreshold
	d, err := proxy.ConfigDump(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	c, err := proxy.Cluster(d, w.cluster)
	if err != nil {
		return err
	}
	if v := c.GetOutlierDetection().GetConsecutiveLocalOriginFailure(); v != nil {
		threshold = int(v.GetValue())
	}
	if c != nil {
		od := c.GetOutlierDetection()
		maxPct, always := "unset", "unset"
		if v := od.GetMaxEjectionPercent(); v != nil {
			maxPct = fmt.Sprint(v.GetValue())
		}
		if v := od.GetAlwaysEjectOneHost(); v != nil {
			always = fmt.Sprint(v.GetValue())
		}
		run.Notes = append(run.Notes, fmt.Sprintf("%s on %s: outlier_detection consecutive_local_origin_failure %d, max_ejection_percent %s, always_eject_one_host %s",
			w.cluster, node, threshold, maxPct, always))
	}

	enforced := w.outlierStat("ejections_enforced_consecutive_local_origin_failure")
	connectFail := proxy.ClusterStat(w.stat, proxy.UpstreamCxConnectFail)
	total, active := w.outlierStat("ejections_enforced_total"), w.outlierStat("ejections_active")
	before, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	// dial makes one batch and records it in the run's timeline; an
	// attempt's time is its batch's start plus its place in the batch.
	dial := func(stage string, o workload.DialOptions) ([]echo.Result, error) {
		start := time.Since(run.Started)
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
	// Until the ejection: batches, the proxy's stats read after each.
	var waiting []echo.Result
	ejected := false
	for i := 0; i < outlierBatches && !ejected; i++ {
		rs, err := dial("until the ejection", workload.DialOptions{Count: outlierBatch, Interval: 100 * time.Millisecond, Timeout: workload.AttemptTimeout})
		if err != nil {
			return err
		}
		waiting = append(waiting, rs...)
		st, err := proxy.Stats(ctx, suite.cluster, node)
		if err != nil {
			return err
		}
		ejected = st[enforced] > before[enforced]
	}
	next, err := dial("after", workload.DialOptions{Count: outlierAfter, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout})
	if err != nil {
		return err
	}
	after, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return err
	}

	failedBefore := len(waiting) - echo.Replies(waiting)
	failedAfter := len(next) - echo.Replies(next)
	backendsAfter := map[string]bool{}
	for _, r := range next {
		if r.Reply != nil {
			backendsAfter[r.Reply.Pod] = true
		}
	}
	dEnforced := after[enforced] - before[enforced]
	dFail := after[connectFail] - before[connectFail]
	run.Counters = map[string]float64{enforced + " on " + node: float64(dEnforced), connectFail + " on " + node: float64(dFail)}
	// Envoy's ejections_enforced_total counts every enforced ejection and
	// ejections_active is a gauge (source/common/upstream/outlier_detection_impl.h
	// ALL_OUTLIER_DETECTION_STATS); the built-in proxy serves both.
	dTotal := after[total] - before[total]
	run.Counters[total+" on "+node] = float64(dTotal)
	run.Counters[active+" on "+node+" (gauge, after)"] = float64(after[active])
	totalOK := dTotal == dEnforced
	activeOK := after[active] == 1
	if _, served := after[total]; !served {
		run.Notes = append(run.Notes, fmt.Sprintf("%s is not served by the proxy on %s", total, node))
	}
	if _, served := after[active]; !served {
		run.Notes = append(run.Notes, fmt.Sprintf("%s is not served by the proxy on %s", active, node))
	}
	// The threshold's failures are the proxy's attempts, each retried: the
	// client sees none (before the agent's max_connect_attempts it saw each).
	run.MetGreen = ejected && dEnforced == 1 && totalOK && activeOK &&
		dFail >= int64(threshold) && dFail <= int64(threshold+outlierSlack) && failedBefore == 0 &&
		failedAfter == 0 && len(next) == outlierAfter && len(backendsAfter) == 2 && !backendsAfter[w.closed]
	run.MetRed = dEnforced == 0 && dTotal == 0 && failedAfter > 0 && len(next) == outlierAfter
	run.Summary = fmt.Sprintf("%s; ejected: %v (ejections_enforced_consecutive_local_origin_failure %+d, ejections_enforced_total %+d, ejections_active %d) after %d failed connect attempts (upstream_cx_connect_fail, threshold %d), %d of %d connections failed; then %d/%d attempts replied, from %v",
		run.Counts(), ejected, dEnforced, dTotal, after[active], dFail, threshold, failedBefore, len(waiting),
		len(next)-failedAfter, len(next), slices.Sorted(maps.Keys(backendsAfter)))
	return nil
}
