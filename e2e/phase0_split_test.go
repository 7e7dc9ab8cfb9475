package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The connections each meshed client makes into the Service range and out of
// it; different counts, so that chains swapped cannot match.
const (
	splitRange   = 7
	splitOutside = 4
)

// The capture chains' counters (tcp_proxy's tcp.<stat_prefix>.downstream_cx_total,
// source/common/tcp_proxy/tcp_proxy.h ALL_TCP_PROXY_STATS), summed over
// every capture listener of a node. Each connection lands in exactly one
// chain, so the three deltas adding up to the attempts means none was
// counted twice or lost.
var (
	statSplitSvc         = proxy.TCPStat(contract.ChainSvc, proxy.DownstreamCxTotal)
	statSplitPassSvc     = proxy.TCPStat(contract.ChainPassthroughSvc, proxy.DownstreamCxTotal)
	statSplitPassthrough = proxy.TCPStat(contract.ChainPassthrough, proxy.DownstreamCxTotal)
)

type splitWorkload struct {
	svc *corev1.Service // its port 80: in the Service range
	// outside is the backend pod's own IP:port, outside the Service range.
	outside string
}

// phase0-split: Phase 0 is the capture's measurement. With Phase 1 off (the
// red run: today's traffic, still kube-proxy's) the proxy counts the meshed
// pods' Service-range connections apart (cap_passthrough_svc) from
// everything else (cap_passthrough), exactly: what tells an operator how
// much traffic Phase 1 would take over. With Phase 1 on (green) exactly
// that traffic, and nothing else, moves to cap_svc. Red is not a failure
// but the measurement under test. Exactness needs no other captured
// traffic on a client's node while the leg dials: the legs run one at a
// time and the other meshed pods are idle (DNS is not captured).
var _ = leg.Define(legs, leg.Leg[*splitWorkload]{
	Name:      "phase0-split",
	Early:     true,
	Workloads: "Service split (1 echo backend, cut); clients on every node dial its VIP:80 and the backend pod's IP:8080 (outside the range)",
	Exercises: "internal/translate/listener.go (filter_chain_matcher: range → cap_passthrough_svc or cap_svc, default cap_passthrough; stat " +
		"prefixes), nodeproxy/proxy.go (selectChain, tcp.<stat_prefix>.downstream_cx_total)",
	Setup: fmt.Sprintf("ClusterIP Service split (1 echo backend, kube-proxy ClusterIP entries deleted); every meshed client dials its VIP:80 ×%d (Service range) "+
		"and the backend pod's IP:%d ×%d (outside the range); the proxy's counters on each client's node are read before and after", splitRange, workload.EchoPort, splitOutside),
	RedExpect: fmt.Sprintf("Phase 0, the measurement: on every client's node %s rises by exactly %d (the range traffic, which still goes to kube-proxy and, cut, is refused), "+
		"%s by exactly %d (all replied), %s by 0",
		statSplitPassSvc, splitRange, statSplitPassthrough, splitOutside, statSplitSvc),
	GreenMeans: fmt.Sprintf("Phase 1 takes exactly the counted traffic: on every client's node %s rises by exactly %d, %s by 0, %s still by exactly %d, "+
		"and every attempt replies", statSplitSvc, splitRange, statSplitPassSvc, statSplitPassthrough, splitOutside),
	Chance: fmt.Sprintf("nothing statistical: counts must be exact and every answered attempt answer within %s (workload.AttemptTimeout); "+
		"another captured connection on a client's node during the dials would break exactness (none is made: the legs run one at a time)", workload.AttemptTimeout),
	Prepare: func(ctx context.Context) (*splitWorkload, error) {
		svc, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "split", workload.Backends{Replicas: 1}, workload.ServiceOptions{Cut: true})
		if err != nil {
			return nil, err
		}
		pods, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=split", 1, time.Minute)
		if err != nil {
			return nil, err
		}
		return &splitWorkload{svc: svc, outside: net.JoinHostPort(pods[0].Status.PodIP, strconv.Itoa(workload.EchoPort))}, nil
	},
	Services: func(w *splitWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(w.svc, 80), {To: w.outside, OutsideRange: true}}
	},
	Measure: func(ctx context.Context, w *splitWorkload, run *evidence.Run) {
		if err := measureSplit(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

func measureSplit(ctx context.Context, w *splitWorkload, run *evidence.Run) error {
	clients := suite.clients
	nodes := clientNodes(clients)
	before, err := nodeStats(ctx, nodes)
	if err != nil {
		return err
	}
	to := workload.Addr(w.svc, 80)
	opts := func(n int) workload.DialOptions {
		return workload.DialOptions{Count: n, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout}
	}
	var jobs []workload.DialJob
	for i := range clients {
		jobs = append(jobs,
			workload.DialJob{Client: &clients[i], To: to, Opts: opts(splitRange)},
			workload.DialJob{Client: &clients[i], To: w.outside, Opts: opts(splitOutside)})
	}
	rss, err := workload.DialAll(ctx, suite.cluster, jobs, len(clients))
	if err != nil {
		return err
	}
	for _, rs := range rss {
		run.Tally(rs, suite.cluster.Zone)
	}
	// The capture counts a connection when it accepts it: final once every
	// attempt ended.
	after, err := nodeStats(ctx, nodes)
	if err != nil {
		return err
	}
	exact := func(stat string, want int) bool {
		for _, n := range nodes {
			if statDelta(before, after, n, stat) != int64(want) {
				return false
			}
		}
		return true
	}
	run.Counters = map[string]float64{}
	for _, n := range nodes {
		for _, s := range []string{statSplitPassSvc, statSplitPassthrough, statSplitSvc} {
			run.Counters[s+" on "+n] = float64(statDelta(before, after, n, s))
		}
	}
	var rangeReplies, outsideReplies, rangeAttempts int
	for _, n := range nodes {
		r, o := run.FromNode(n, to), run.FromNode(n, w.outside)
		rangeReplies, outsideReplies, rangeAttempts = rangeReplies+r.Replies, outsideReplies+o.Replies, rangeAttempts+r.Attempts
	}
	counted := exact(statSplitPassthrough, splitOutside)
	outsideOK := outsideReplies == splitOutside*len(clients)
	// Phase 0: the range apart, still kube-proxy's (cut: no reply).
	run.MetRed = rangeAttempts > 0 && counted && exact(statSplitPassSvc, splitRange) && exact(statSplitSvc, 0) && outsideOK && rangeReplies == 0
	// Phase 1: the same range traffic through cap_svc, answered.
	run.MetGreen = rangeAttempts > 0 && counted && exact(statSplitSvc, splitRange) && exact(statSplitPassSvc, 0) && run.Replies == run.Attempts
	run.Summary = fmt.Sprintf("%s (range %d/%d, outside %d/%d); per node: range in %s exactly: %v, in %s exactly: %v, rest in %s exactly: %v",
		run.Counts(), rangeReplies, splitRange*len(clients), outsideReplies, splitOutside*len(clients),
		contract.ChainPassthroughSvc, exact(statSplitPassSvc, splitRange), contract.ChainSvc, exact(statSplitSvc, splitRange),
		contract.ChainPassthrough, counted)
	run.Notes = append(run.Notes, deltaNote(before, after, nodes, statSplitPassSvc, statSplitSvc, statSplitPassthrough))
	return nil
}
