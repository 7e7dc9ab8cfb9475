package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// The connections each client Deployment makes to each Service: four
// different counts, so a connection credited to the wrong client or the
// wrong Service cannot come out right.
const (
	srcAlphaN, srcAlphaM = 3, 5
	srcBetaN, srcBetaM   = 4, 2
	// srcAlphaRefused: attrsrc-alpha's dials of attrsrc-n:81, which neither Service declares:
	// refused, so never a connection, and the refusal line names the pod.
	srcAlphaRefused = 2
)

// attrSourceWorkload is two Services on the same backends and two meshed
// client Deployments, each one pod on the same node.
type attrSourceWorkload struct {
	n, m        *corev1.Service
	alpha, beta corev1.Pod
}

// attribution-source: the agent counts each connection the proxy connects
// under the meshed pod that made it, named by its Deployment, and the Service
// port it dialled (svclb_svc_connections_total).
var _ = leg.Define(legs, leg.Leg[*attrSourceWorkload]{
	Name:  "attribution-source",
	Needs: leg.Needs{Workers: 1},
	Early: true,
	Workloads: "Services attrsrc-n and attrsrc-m (same 2 echo backends, cut); meshed client Deployments attrsrc-alpha and attrsrc-beta, " +
		"one pod each on the first worker, dial each Service on 80 in different counts; alpha also dials attrsrc-n on undeclared 81",
	Exercises: "internal/translate/listener.go (cap_svc: access log svclb_connections, log_type_filter TcpUpstreamConnected, " +
		"access_log_options.flush_access_log_on_connected), nodeproxy/proxy.go (the entry written as the upstream connects), " +
		"agent/internal/xdsserver/connections.go (svclb_svc_connections_total, bounded), agent/podsources.go (pod by IP, workload by owner; the refusal line's source_pod)",
	Setup: fmt.Sprintf("ClusterIP Services attrsrc-n and attrsrc-m selecting the same 2 echo backends, kube-proxy ClusterIP entries deleted; "+
		"client Deployment attrsrc-alpha dials attrsrc-n:80 ×%d, attrsrc-m:80 ×%d and attrsrc-n:81 ×%d, attrsrc-beta attrsrc-n:80 ×%d and attrsrc-m:80 ×%d",
		srcAlphaN, srcAlphaM, srcAlphaRefused, srcBetaN, srcBetaM),
	RedExpect: "no reply; no connection counted, no refusal logged (Phase flags off)",
	GreenMeans: fmt.Sprintf("every :80 attempt replies and every :81 attempt is refused by the proxy; summed over the agents, "+
		"%s{source_namespace=<legs ns>,source_workload,namespace,service,port=\"80\"} rises by exactly %d (alpha→n), %d (alpha→m), %d (beta→n) "+
		"and %d (beta→m), and no series of port 81 appears; a refusal log record of attrsrc-n's VIP:81 names alpha's pod as source_pod",
		agent.ConnectionsMetric, srcAlphaN, srcAlphaM, srcBetaN, srcBetaM),
	Chance: fmt.Sprintf("nothing statistical: every attempt must reply within %s (workload.AttemptTimeout); the counts are exact: "+
		"one connected entry per connection the proxy connects, none is retried to backends that are up; the agent's counts are read until they "+
		"account for every reply, at most %s (measure.CountersSettle)", workload.AttemptTimeout, measure.CountersSettle),
	Prepare: func(ctx context.Context) (*attrSourceWorkload, error) {
		c := suite.cluster
		n, err := workload.DeployEcho(ctx, c, suite.legsNS, "attrsrc-n", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true})
		if err != nil {
			return nil, err
		}
		m := workload.Service(suite.legsNS, "attrsrc-m", workload.ServiceOptions{Selector: n.Spec.Selector, Cut: true})
		objs := []client.Object{m}
		node := c.Workers()[0].Name
		for _, name := range []string{"attrsrc-alpha", "attrsrc-beta"} {
			dep, err := workload.MeshedClientDeployment(suite.legsNS, name, node, name)
			if err != nil {
				return nil, err
			}
			objs = append(objs, dep)
		}
		if err := c.Create(ctx, objs...); err != nil {
			return nil, err
		}
		if _, err := guard.WaitCut(ctx, c, m, time.Minute); err != nil {
			return nil, err
		}
		w := &attrSourceWorkload{n: n, m: m}
		for name, p := range map[string]*corev1.Pod{"attrsrc-alpha": &w.alpha, "attrsrc-beta": &w.beta} {
			pods, err := c.WaitPodsReady(ctx, suite.legsNS, workload.RoleLabel+"="+name, 1, 3*time.Minute)
			if err != nil {
				return nil, err
			}
			*p = pods[0]
		}
		return w, nil
	},
	Services: func(w *attrSourceWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(w.n, 80), measure.ServicePort(w.m, 80),
			measure.ServicePort(w.n, 81).Refused(agent.ReasonPortNotDeclared)}
	},
	Measure: func(ctx context.Context, w *attrSourceWorkload, run *evidence.Run) {
		if err := measureAttrSource(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// attrSourcePlan is who dials which Service how often: the connection each
// counts under, and its count.
func attrSourcePlan(w *attrSourceWorkload) (map[agent.Connection]int, map[agent.Connection]*corev1.Pod) {
	conn := func(client string, svc *corev1.Service) agent.Connection {
		return agent.Connection{SourceNamespace: suite.legsNS, SourceWorkload: client, Namespace: svc.Namespace, Service: svc.Name, Port: 80}
	}
	counts := map[agent.Connection]int{
		conn("attrsrc-alpha", w.n): srcAlphaN, conn("attrsrc-alpha", w.m): srcAlphaM,
		conn("attrsrc-beta", w.n): srcBetaN, conn("attrsrc-beta", w.m): srcBetaM,
	}
	clients := map[agent.Connection]*corev1.Pod{}
	for k := range counts {
		clients[k] = &w.alpha
		if k.SourceWorkload == "attrsrc-beta" {
			clients[k] = &w.beta
		}
	}
	return counts, clients
}

func measureAttrSource(ctx context.Context, w *attrSourceWorkload, run *evidence.Run) error {
	counts, clients := attrSourcePlan(w)
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b agent.Connection) int {
		return cmp.Or(strings.Compare(a.SourceWorkload, b.SourceWorkload), strings.Compare(a.Service, b.Service))
	})
	refusedConn := agent.Connection{SourceNamespace: suite.legsNS, SourceWorkload: "attrsrc-alpha", Namespace: w.n.Namespace, Service: w.n.Name, Port: 81}
	read := append(slices.Clone(keys), refusedConn)
	since := time.Now()
	before, err := agent.Connections(ctx, suite.cluster, read...)
	if err != nil {
		return err
	}
	jobs := make([]workload.DialJob, len(keys))
	for i, k := range keys {
		svc := w.n
		if k.Service == w.m.Name {
			svc = w.m
		}
		jobs[i] = workload.DialJob{Client: clients[k], To: workload.Addr(svc, 80),
			Opts: workload.DialOptions{Count: counts[k], Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout}}
	}
	jobs = append(jobs, workload.DialJob{Client: &w.alpha, To: workload.Addr(w.n, 81),
		Opts: workload.DialOptions{Count: srcAlphaRefused, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout}})
	rss, err := workload.DialAll(ctx, suite.cluster, jobs, len(jobs))
	if err != nil {
		return err
	}
	reached, refused, replies := true, true, 0
	for j, rs := range rss {
		run.Tally(rs, suite.cluster.Zone)
		for _, r := range rs {
			if j == len(keys) { // the :81 job
				refused = refused && echo.Outcome(r) == echo.OutcomeProxyClosed
				continue
			}
			reached = reached && r.OK
			if r.OK {
				replies++
			}
		}
	}
	// The proxy writes the entry as the upstream connects and sends it within a flush
	// (1 s): read until the counts account for every reply.
	var after map[agent.Connection]float64
	var readErr error
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, measure.CountersSettle, true, func(ctx context.Context) (bool, error) {
		after, readErr = agent.Connections(ctx, suite.cluster, read...)
		if readErr != nil {
			return false, nil
		}
		sum := 0.0
		for _, k := range keys {
			sum += after[k] - before[k]
		}
		return sum >= float64(replies), nil
	})
	if after == nil {
		return fmt.Errorf("agent connection counts: %w", readErr)
	}
	run.Counters = map[string]float64{}
	exact, moved := true, false
	for _, k := range keys {
		d := after[k] - before[k]
		run.Counters[fmt.Sprintf("%s %s→%s:%d", agent.ConnectionsMetric, k.SourceWorkload, k.Service, k.Port)] = d
		exact = exact && d == float64(counts[k])
		moved = moved || d != 0
	}
	refusedCounted := after[refusedConn] - before[refusedConn]
	run.Counters[fmt.Sprintf("%s attrsrc-alpha→%s:81", agent.ConnectionsMetric, w.n.Name)] = refusedCounted
	// The refusal line names alpha's pod: read the logs until it is there, at most
	// CountersSettle. Not when nothing replied: then no proxy refused (red), and no line comes.
	wantSrc, vip81 := suite.legsNS+"/"+w.alpha.Name, workload.Addr(w.n, 81)
	named := false
	if refused && replies > 0 {
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, measure.CountersSettle, true, func(ctx context.Context) (bool, error) {
			logs, err := agent.RefusalLogs(ctx, suite.cluster, since)
			if err != nil {
				return false, nil
			}
			named = slices.ContainsFunc(logs, func(l agent.RefusalLog) bool { return l.Destination == vip81 && l.SourcePod == wantSrc })
			return named, nil
		})
	}
	run.MetGreen = run.Attempts > 0 && reached && refused && exact && refusedCounted == 0 && named
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && !moved && refusedCounted == 0
	run.Summary = fmt.Sprintf("%s; connections per source workload and Service exactly as dialled: %v; refusal line names %s: %v",
		run.Counts(), exact, wantSrc, named)
	return nil
}
