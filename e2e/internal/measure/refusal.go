package measure

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

const (
	// attemptsPerClient is how many connections each meshed client makes.
	attemptsPerClient = 5
	// refusalAttemptTimeout bounds one attempt. A refusal is immediate
	// (the proxy accepts and closes); only an attempt nothing answers waits
	// it out (refuse-no-service red: with Phase 1 off an unallocated VIP
	// has no REJECT element), and all attempts run at once, so the bound is
	// paid once per run.
	refusalAttemptTimeout = 3 * time.Second
)

// RedExpect is every refusal leg's red expectation.
const RedExpect = "no backend reply and no refusal counted or logged (Phase 2 off)"

// RefusalChance is what in a refusal leg can fail by chance.
var RefusalChance = fmt.Sprintf("nothing statistical; %d attempts per client at once, %s each: a refusal is immediate, only red's unanswered attempts wait the bound, once",
	attemptsPerClient, refusalAttemptTimeout)

// GreenMeans is a refusal leg's green condition for reason.
func GreenMeans(reason string) string {
	return fmt.Sprintf("the proxy refuses every attempt (accepted then closed, no ECONNREFUSED); on each client's node %s{reason=%q} rises by exactly that node's attempts and no other reason; the agent's refusal log holds a record naming the Service and the dialled address",
		agent.RefusedMetric, reason)
}

// Target is what a refusal leg dials and the refusal it expects.
type Target struct {
	To string // host:port
	// Namespace and Service label the expected refusals ("" for no-service).
	Namespace, Service string
	Reason             string
}

// Dialled declares the target for the leg's evidence.
func (t Target) Dialled() Dialled {
	return Dialled{To: t.To, Namespace: t.Namespace, Service: t.Service, Reason: t.Reason}
}

// Refusal runs one refusal run from every client into run: every attempt
// its own connection, all at once. What the clients see decides MetGreen
// (the proxy closed every attempt) and MetRed (no reply); what each node's
// agent counted and logged is the leg's evidence (Target.Dialled, checked
// per node by the suite's Probe).
func Refusal(ctx context.Context, c *cluster.Cluster, clients []corev1.Pod, t Target, run *evidence.Run) {
	var jobs []workload.DialJob
	for i := range clients {
		for range attemptsPerClient {
			jobs = append(jobs, workload.DialJob{Client: &clients[i], To: t.To, Opts: workload.DialOptions{Count: 1, Timeout: refusalAttemptTimeout}})
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
	run.MetGreen = run.Attempts > 0 && run.ProxyClosed == run.Attempts
	run.MetRed = run.Attempts > 0 && run.Replies == 0
	run.Summary = fmt.Sprintf("%s; expected refusal: %s", run.Counts(), t.Reason)
}
