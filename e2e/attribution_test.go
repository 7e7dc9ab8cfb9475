package e2e

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The connections each meshed client makes: to each Service's port 80, and
// to its port 81 that neither declares. The counts differ between the
// Services and swap between the ports, so a count credited to the wrong
// Service cannot come out right.
const (
	attrReachA, attrReachB   = 6, 3
	attrRefuseA, attrRefuseB = 2, 4
)

// attributionWorkload is two Services on the same backends.
type attributionWorkload struct{ a, b *corev1.Service }

// attribution: what the proxy and the agent count is per Service, even for
// two Services on the same backends, and a refusal's log line names its
// Service. The evidence checks the refusals per Service and reason exactly
// and a log record of each port 81; the leg adds that each Service's
// upstream_cx_total rose by exactly its own dials.
var _ = leg.Define(legs, leg.Leg[*attributionWorkload]{
	Name:  "attribution",
	Early: true,
	Workloads: "Services attr-a and attr-b (same 2 echo backends, cut); clients on every node dial each on 80 and on undeclared 81, in different " +
		"counts",
	Exercises: "internal/translate/cluster.go (alt_stat_name contract.StatName), nodeproxy/proxy.go (cluster.<alt_stat_name>.* stats), " +
		"agent/internal/xdsserver/server.go (Classify, record: svclb_svc_refused_total{namespace,service} and the refusal log line)",
	Setup: fmt.Sprintf("ClusterIP Services attr-a and attr-b selecting the same 2 echo backends, kube-proxy ClusterIP entries deleted; every meshed client dials "+
		"attr-a:80 ×%d, attr-b:80 ×%d, attr-a:81 ×%d, attr-b:81 ×%d (port 81 is declared by neither)", attrReachA, attrReachB, attrRefuseA, attrRefuseB),
	RedExpect: "no reply; no per-Service proxy stat, refusal counter or refusal log line moves (Phase flags off)",
	GreenMeans: fmt.Sprintf("every :80 attempt replies and every :81 attempt is refused by the proxy; on each client's node "+
		"cluster.svc.<ns>.attr-a.80.upstream_cx_total rises by exactly %d and cluster.svc.<ns>.attr-b.80.upstream_cx_total by exactly %d; "+
		"%s{reason=%q} rises per node by exactly the refused attempts of each Service, no other reason; a refusal log record names each Service and its VIP:81",
		attrReachA, attrReachB, agent.RefusedMetric, agent.ReasonPortNotDeclared),
	Chance: fmt.Sprintf("nothing statistical: every attempt must reply or be refused, each within %s (workload.AttemptTimeout); "+
		"upstream_cx_total exact: a connect retried by the proxy would count twice, none is expected to backends that are up", workload.AttemptTimeout),
	Prepare: func(ctx context.Context) (*attributionWorkload, error) {
		a, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "attr-a", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true})
		if err != nil {
			return nil, err
		}
		b := workload.Service(suite.legsNS, "attr-b", workload.ServiceOptions{Selector: a.Spec.Selector, Cut: true})
		if err := suite.cluster.Create(ctx, b); err != nil {
			return nil, err
		}
		if _, err := guard.WaitCut(ctx, suite.cluster, b, time.Minute); err != nil {
			return nil, err
		}
		return &attributionWorkload{a: a, b: b}, nil
	},
	Services: func(w *attributionWorkload) []measure.Dialled {
		return []measure.Dialled{
			measure.ServicePort(w.a, 80), measure.ServicePort(w.b, 80),
			measure.ServicePort(w.a, 81).Refused(agent.ReasonPortNotDeclared),
			measure.ServicePort(w.b, 81).Refused(agent.ReasonPortNotDeclared),
		}
	},
	Measure: func(ctx context.Context, w *attributionWorkload, run *evidence.Run) {
		if err := measureAttribution(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// attrStat is a Service's per-port counter the leg reads: upstream
// connections of its port 80 cluster, under its alt_stat_name.
func attrStat(svc *corev1.Service) string {
	return proxy.ClusterStat(contract.StatName(svc.Namespace, svc.Name, 80), proxy.UpstreamCxTotal)
}

func measureAttribution(ctx context.Context, w *attributionWorkload, run *evidence.Run) error {
	clients := suite.clients
	nodes := clientNodes(clients)
	before, err := nodeStats(ctx, nodes)
	if err != nil {
		return err
	}
	plan := []struct {
		to     string
		n      int
		refuse bool
	}{
		{workload.Addr(w.a, 80), attrReachA, false}, {workload.Addr(w.b, 80), attrReachB, false},
		{workload.Addr(w.a, 81), attrRefuseA, true}, {workload.Addr(w.b, 81), attrRefuseB, true},
	}
	var jobs []workload.DialJob
	for i := range clients {
		for _, p := range plan {
			jobs = append(jobs, workload.DialJob{Client: &clients[i], To: p.to,
				Opts: workload.DialOptions{Count: p.n, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout}})
		}
	}
	rss, err := workload.DialAll(ctx, suite.cluster, jobs, len(clients))
	if err != nil {
		return err
	}
	reached, refused := true, true
	for j, rs := range rss {
		run.Tally(rs, suite.cluster.Zone)
		for _, r := range rs {
			if plan[j%len(plan)].refuse {
				refused = refused && echo.Outcome(r) == echo.OutcomeProxyClosed
			} else {
				reached = reached && r.OK
			}
		}
	}
	// The proxy counts an upstream connection when it opens it: final once
	// the reply came back.
	after, err := nodeStats(ctx, nodes)
	if err != nil {
		return err
	}
	run.Counters = map[string]float64{}
	exact, moved := true, false
	for _, n := range nodes {
		for svc, want := range map[*corev1.Service]int64{w.a: attrReachA, w.b: attrReachB} {
			d := statDelta(before, after, n, attrStat(svc))
			run.Counters[attrStat(svc)+" on "+n] = float64(d)
			exact = exact && d == want
			moved = moved || d != 0
		}
	}
	run.MetGreen = run.Attempts > 0 && reached && refused && exact
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && !moved
	run.Summary = fmt.Sprintf("%s; per-Service upstream_cx_total exactly as dialled on every node: %v", run.Counts(), exact)
	run.Notes = append(run.Notes, deltaNote(before, after, nodes, attrStat(w.a), attrStat(w.b)))
	return nil
}
