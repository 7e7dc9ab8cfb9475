package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// refuseResetAttempts is how many connections each meshed client makes per
// step; refuseResetTimeout bounds one (a reset is immediate; red's attempts
// to a cut Service wait it out, all at once, so once per step).
const (
	refuseResetAttempts = 5
	refuseResetTimeout  = 3 * time.Second
	// refuseResetCounted bounds the wait for the agents to read the refuse
	// tables' counters (contract.RefuseCountEvery, then the scrape).
	refuseResetCounted = 3 * contract.RefuseCountEvery
	// refuseResetUndeclared is a port the Service does not declare.
	refuseResetUndeclared = 81
)

// refuseResetWorkload is the empty Service and what its backend will be.
type refuseResetWorkload struct {
	svc     *corev1.Service
	app     string // the backend's app label, which the Service selects
	backend string // the backend pod's name, created and deleted in each run
}

// refuse-reset: with the agent's refusal: reset, a Service without endpoints
// is refused at the SYN inside each client's netns (ECONNREFUSED, as through
// kube-proxy), counted as no-endpoints, and so is a port the Service does not
// declare, counted as port-not-declared; once an endpoint appears, every
// attempt is answered. (refuse-no-endpoints and refuse-port-not-declared run
// with refusal: close, the default: accepted, then closed.)
var _ = leg.Define(legs, leg.Leg[*refuseResetWorkload]{
	Name: "refuse-reset",
	Setup: "ClusterIP Service selecting no pod yet, kube-proxy ClusterIP entries deleted on every node; the agent's refusal: reset in green (close in red and after the leg); " +
		"dialled on its port 80 and on port 81, which it does not declare",
	RedExpect: fmt.Sprintf("no backend reply, before and after the endpoint appears, and no refusal counted (Phase 2 off; %s=%s)",
		contract.KeyRefusal, contract.RefusalClose),
	GreenMeans: fmt.Sprintf("while the Service has no endpoint, every attempt to port 80 and every attempt to port 81 fails with ECONNREFUSED "+
		"(host-refused: the SYN reset in the client's netns, no proxy accept); %s{reason=%q} rises by exactly port 80's attempts and "+
		"%s{reason=%q} by exactly port 81's, and for each port the agent's refusal log names the reason, the Service, the dialled address, "+
		"flag %s and a meshed client pod; once one endpoint is programmed, every attempt to port 80 gets a reply and none is refused",
		agent.RefusedMetric, agent.ReasonNoEndpoints, agent.RefusedMetric, agent.ReasonPortNotDeclared, contract.FlagReset),
	Workloads: fmt.Sprintf("Service resetep (port 80, selects app resetep-backend, cut); %d attempts per client to each of port 80 and port %d at once, "+
		"then one echo pod resetep-backend-0 (deleted after the run) and %d more attempts per client to port 80",
		refuseResetAttempts, refuseResetUndeclared, refuseResetAttempts),
	Exercises: "internal/refuse (the refuse table in each pod netns: no-endpoints, and port-not-declared from the served VIPs and their declared ports), " +
		"agent/refuser.go (the sets around the push, the counters per reason), agent/syncer.go, agent/settings.go (refusal)",
	AgentConfig: func(on bool) map[string]string {
		if on {
			return map[string]string{contract.KeyRefusal: contract.RefusalReset}
		}
		return map[string]string{contract.KeyRefusal: contract.RefusalClose}
	},
	Chance: fmt.Sprintf("nothing statistical; %d attempts per client at once per step, %s each: a reset is immediate, only red's unanswered attempts wait the bound, once per step; "+
		"the counters are read within %s", refuseResetAttempts, refuseResetTimeout, refuseResetCounted),
	Early: true,
	Prepare: func(ctx context.Context) (*refuseResetWorkload, error) {
		w := &refuseResetWorkload{app: "resetep-backend", backend: "resetep-backend-0"}
		w.svc = workload.Service(suite.legsNS, "resetep", workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: w.app}, Cut: true})
		if err := suite.cluster.Create(ctx, w.svc); err != nil {
			return nil, err
		}
		if _, err := guard.WaitCut(ctx, suite.cluster, w.svc, time.Minute); err != nil {
			return nil, err
		}
		return w, nil
	},
	Measure: func(ctx context.Context, w *refuseResetWorkload, run *evidence.Run) {
		if err := refuseReset(ctx, w, run); err != nil && run.Error == "" {
			run.Error = err.Error()
		}
	},
	// Declared nothing for the probe: its checks expect the proxy to see every attempt
	// (tcp.cap_svc), which a SYN reset in the pod's netns never reaches; the measure checks
	// the agents' counters and log itself.
})

// refuseReset is one run: attempts to the empty Service's declared port and to a port it does
// not declare, then to it with one endpoint, which it deletes again for the next run.
func refuseReset(ctx context.Context, w *refuseResetWorkload, run *evidence.Run) error {
	c := suite.cluster
	to, undeclared := workload.Addr(w.svc, 80), workload.Addr(w.svc, refuseResetUndeclared)
	dialled := []measure.Dialled{measure.ServicePort(w.svc, 80)}
	// The proxies serve the empty cluster; the refuse sets follow right after the push.
	if _, err := measure.WaitProgrammed(ctx, c, dialled); err != nil {
		return err
	}
	time.Sleep(time.Second)
	before, err := agent.Refusals(ctx, c, w.svc.Namespace, w.svc.Name)
	if err != nil {
		return err
	}
	since := time.Now()
	empty, err := refuseResetDial(ctx, to, undeclared)
	if err != nil {
		return err
	}
	// Per destination: what the clients saw.
	byTo := map[string]*evidence.Run{to: {}, undeclared: {}}
	for _, rs := range empty {
		run.Tally(rs, c.Zone)
		for _, r := range rs {
			if b := byTo[r.To]; b != nil {
				b.Tally([]echo.Result{r}, c.Zone)
			}
		}
	}
	want := map[string]string{to: agent.ReasonNoEndpoints, undeclared: agent.ReasonPortNotDeclared}
	counted := map[string]float64{}
	// Red expects none: the whole bound is waited for, so a late count is seen.
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, refuseResetCounted, true, func(ctx context.Context) (bool, error) {
		after, err := agent.Refusals(ctx, c, w.svc.Namespace, w.svc.Name)
		if err != nil {
			return false, nil
		}
		done := true
		for d, reason := range want {
			counted[d] = after[reason] - before[reason]
			done = done && byTo[d].HostRefused > 0 && counted[d] >= float64(byTo[d].HostRefused)
		}
		return done, nil
	})
	logs, err := agent.RefusalLogs(ctx, c, since)
	if err != nil {
		return err
	}
	clients := map[string]bool{}
	for _, p := range suite.clients {
		clients[p.Namespace+"/"+p.Name] = true
	}
	// A line names the Service, the dialled address, the flag and the meshed pod that dialled.
	logged := map[string]int{}
	for _, l := range logs {
		if d := l.Destination; l.Reason == want[d] && l.Namespace == w.svc.Namespace && l.Service == w.svc.Name &&
			l.Flag == contract.FlagReset && clients[l.SourcePod] {
			logged[d]++
		}
	}
	emptyAttempts := run.Attempts
	allRefused := emptyAttempts > 0
	var parts []string
	for _, d := range []string{to, undeclared} {
		r := byTo[d]
		allRefused = allRefused && r.Attempts > 0 && r.HostRefused == r.Attempts && counted[d] == float64(r.HostRefused) && logged[d] > 0
		parts = append(parts, fmt.Sprintf("%s %d of %d host-refused, %g counted %s, %d log records with flag %s and a client pod",
			d, r.HostRefused, r.Attempts, counted[d], want[d], logged[d], contract.FlagReset))
	}
	noneCounted := counted[to] == 0 && counted[undeclared] == 0

	// One endpoint: once programmed, every attempt is answered.
	if err := c.Create(ctx, workload.EchoPod(w.svc.Namespace, w.backend, w.app, workload.EchoPodOptions{})); err != nil {
		return err
	}
	defer func() {
		if err := removeBackend(context.WithoutCancel(ctx), w); err != nil && run.Error == "" {
			run.Error = err.Error()
		}
	}()
	if err := workload.WaitEndpoints(ctx, c, w.svc.Namespace, w.svc.Name, map[string]string{w.backend: workload.EndpointReady}); err != nil {
		return err
	}
	if _, err := measure.WaitProgrammed(ctx, c, dialled); err != nil {
		return err
	}
	// The endpoint made kube-proxy write the Service's ClusterIP entries again: dial once the
	// guard has cut them again, so a reply comes through the node proxy only (red: none).
	if _, err := guard.WaitCut(ctx, c, w.svc, time.Minute); err != nil {
		return err
	}
	filled, err := refuseResetDial(ctx, to)
	if err != nil {
		return err
	}
	repliesBefore, refusedBefore := run.Replies, run.HostRefused
	for _, rs := range filled {
		run.Tally(rs, c.Zone)
	}
	filledAttempts := run.Attempts - emptyAttempts
	replies, refusedFilled := run.Replies-repliesBefore, run.HostRefused-refusedBefore
	run.MetGreen = allRefused && filledAttempts > 0 && replies == filledAttempts && refusedFilled == 0
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && noneCounted
	run.Summary = fmt.Sprintf("%s; without endpoints: %s; with one endpoint %d of %d replies, %d host-refused",
		run.Counts(), strings.Join(parts, "; "), replies, filledAttempts, refusedFilled)
	return nil
}

// refuseResetDial makes refuseResetAttempts connections to each of tos from every meshed
// client, all at once.
func refuseResetDial(ctx context.Context, tos ...string) ([][]echo.Result, error) {
	var jobs []workload.DialJob
	for i := range suite.clients {
		for _, to := range tos {
			for range refuseResetAttempts {
				jobs = append(jobs, workload.DialJob{Client: &suite.clients[i], To: to, Opts: workload.DialOptions{Count: 1, Timeout: refuseResetTimeout}})
			}
		}
	}
	return workload.DialAll(ctx, suite.cluster, jobs, len(jobs))
}

// removeBackend deletes the backend pod and waits until the Service has no endpoint: the
// next run starts from an empty Service again.
func removeBackend(ctx context.Context, w *refuseResetWorkload) error {
	c := suite.cluster
	if err := c.CS.CoreV1().Pods(w.svc.Namespace).Delete(ctx, w.backend, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return fmt.Errorf("delete %s: %w", w.backend, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := c.CS.CoreV1().Pods(w.svc.Namespace).Get(ctx, w.backend, metav1.GetOptions{}); err == nil {
			return false, nil
		}
		l, err := c.CS.DiscoveryV1().EndpointSlices(w.svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + w.svc.Name})
		if err != nil {
			return false, nil
		}
		for _, es := range l.Items {
			if len(es.Endpoints) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s/%s without endpoints again: %w", w.svc.Namespace, w.svc.Name, err)
	}
	return nil
}
