package measure

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

const (
	// attemptsPerClient is how many connections each meshed client makes.
	attemptsPerClient = 5
	// countWait bounds the wait for the agent's counter to reach the
	// attempts (a red run, which must count nothing, waits all of it). The
	// agent counts from the proxy's access log stream, which Envoy flushes
	// every second (CommonGrpcAccessLogConfig buffer_flush_interval default,
	// api/envoy/extensions/access_loggers/grpc/v3/als.proto): a few flushes.
	countWait = 5 * time.Second
)

// RedExpect is every refusal leg's red expectation.
const RedExpect = "no backend reply and no refusal counted (Phase 2 off)"

// GreenMeans is a refusal leg's green condition for reason.
func GreenMeans(reason string) string {
	return fmt.Sprintf("proxy refuses every attempt (accepted then closed, no ECONNREFUSED); %s{reason=%q} rises by exactly the attempts", agent.RefusedMetric, reason)
}

// Target is what a refusal leg dials and the refusal it expects.
type Target struct {
	To string // host:port
	// Namespace and Service label the expected refusals ("" for no-service).
	Namespace, Service string
	Reason             string
}

// Refusal runs one refusal run from every client into run.
func Refusal(ctx context.Context, c *cluster.Cluster, clients []corev1.Pod, t Target, run *evidence.Run) {
	before, err := agent.Refusals(ctx, c, t.Namespace, t.Service)
	if err != nil {
		run.Error = err.Error()
		return
	}
	// Every attempt its own connection, all at once: an attempt that is
	// neither refused nor answered (refuse-no-service red: with Phase 1 off
	// an unallocated VIP has no REJECT element) waits for its timeout, and
	// these waits overlap instead of adding up. The count is the same, so the
	// exact-match check below loses nothing.
	var jobs []workload.DialJob
	for i := range clients {
		for range attemptsPerClient {
			jobs = append(jobs, workload.DialJob{Client: &clients[i], To: t.To, Opts: workload.DialOptions{Count: 1, Timeout: 3 * time.Second}})
		}
	}
	rss, err := workload.DialAll(ctx, c, jobs, len(jobs))
	if err != nil {
		run.Error = err.Error()
		return
	}
	for _, rs := range rss {
		run.Tally(rs, c.Zone)
	}
	// The wait ends at countWait whatever the count: only an exact match
	// passes, and a red run must count nothing. Each read uses the leg's ctx,
	// not the poll's: a read in flight at countWait must complete.
	var after map[string]float64
	var scrapeErr error
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, countWait, true, func(context.Context) (bool, error) {
		if after, scrapeErr = agent.Refusals(ctx, c, t.Namespace, t.Service); scrapeErr != nil {
			return false, scrapeErr
		}
		return after[t.Reason]-before[t.Reason] >= float64(run.Attempts), nil
	})
	if scrapeErr != nil || after == nil {
		run.Error = fmt.Sprintf("agent refusal counters: %v", scrapeErr)
		return
	}
	run.Counters = map[string]float64{}
	other := 0.0
	for r := range after {
		d := after[r] - before[r]
		run.Counters[fmt.Sprintf("%s{reason=%q,namespace=%q,service=%q}", agent.RefusedMetric, r, t.Namespace, t.Service)] = d
		if r != t.Reason {
			other += d
		}
	}
	got := after[t.Reason] - before[t.Reason]
	refusedByProxy := run.Attempts > 0 && run.ProxyClosed == run.Attempts
	run.MetGreen = refusedByProxy && got == float64(run.Attempts) && other == 0
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && got == 0 && other == 0
	run.Summary = fmt.Sprintf("%s; %s +%g (want +%d)", run.Counts(), t.Reason, got, run.Attempts)
}
