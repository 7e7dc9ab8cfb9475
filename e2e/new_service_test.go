package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
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

const (
	// newServiceWithin bounds the wait for a new Service's first reply: the
	// agent and kube-proxy program one in well under a second, and a loaded
	// 2-core machine has once taken a few.
	newServiceWithin = 15 * time.Second
	// newServiceMeshedWithin is the meshed client's bound, which red waits
	// all of: the agent's first reply came 0.2 s after the creation here
	// (perf: p50 0.4 s from Create, loaded), kube-proxy's about 1.3 s.
	newServiceMeshedWithin = 8 * time.Second
	// newServiceInterval is the probes' spacing, the resolution of the
	// times measured.
	newServiceInterval = 100 * time.Millisecond
	// newServiceAttempt bounds one attempt.
	newServiceAttempt = 2 * time.Second
	// newServiceName and its twin are created by each run and deleted after.
	newServiceName = "newsvc"
	newServiceTwin = "newsvc-twin"
)

type newServiceWorkload struct {
	meshed, plain *corev1.Pod // on the same worker
	selector      map[string]string
	// agentIP and twinIP are the ClusterIPs the runs create the Services
	// at, chosen in prepare so that the probes dial them before they exist.
	agentIP, twinIP string
}

func (w *newServiceWorkload) agentTo() string { return net.JoinHostPort(w.agentIP, "80") }
func (w *newServiceWorkload) twinTo() string  { return net.JoinHostPort(w.twinIP, "80") }

// new-service: a Service created while the agent runs is reached through
// it, and how long that takes next to kube-proxy on the same node.
var _ = leg.Define(legs, leg.Leg[*newServiceWorkload]{
	Name:  "new-service",
	Needs: leg.Needs{Workers: 1},
	Workloads: "echo Deployment newsvc (2 pods, Ready first); per run Service newsvc (cut) and its unguarded twin newsvc-twin at ClusterIPs picked " +
		"in prepare; the meshed client and a client that is not meshed on the first worker dial them from before their creation until the " +
		"first reply",
	Exercises: "agent/intake.go and batch.go (a Service's first sync: svc: cluster and its load assignment pushed), internal/translate/cluster.go " +
		"and endpoints.go; kube-proxy on the twin as the reference",
	Setup: "2 echo backends, Ready before any Service; per run two Services created at once at ClusterIPs chosen beforehand: newsvc, cut (kube-proxy ClusterIP entries deleted), dialled by the meshed client " +
		"on the first worker, and its unguarded twin newsvc-twin dialled by a client on the same node that is not meshed (kube-proxy's path); " +
		fmt.Sprintf("both clients dial every %s from before the creation until the first reply (the meshed client at most %s, the other %s); both Services deleted after the run",
			newServiceInterval, newServiceMeshedWithin, newServiceWithin),
	RedExpect: "the meshed client never gets a reply through a svc: cluster, and once the guard has cut the Service none at all",
	GreenMeans: "the meshed client's first reply comes through the node proxy's svc: cluster of the new Service, and it keeps getting replies once the Service is cut; " +
		"the times from creation to the first reply through the agent and through kube-proxy (twin) are in the counters",
	Chance: fmt.Sprintf("nothing statistical: the first reply must come within %s of the creation (%s through kube-proxy; attempts %s apart, %s each), and the %d attempts once cut must all reply within %s each; "+
		"the meshed probe's attempts before the Service exists are refused no-service in green and counted with it; in red it waits the whole bound, "+
		"unless an attempt lands between kube-proxy programming the new Service and the guard cutting it (kube-proxy answers it; red then rests on the attempts once cut)",
		newServiceMeshedWithin, newServiceWithin, newServiceInterval, newServiceAttempt, workload.Quick.Count, workload.AttemptTimeout),
	Prepare: prepareNewService,
	Services: func(w *newServiceWorkload) []measure.Dialled {
		return []measure.Dialled{{To: w.agentTo(), Namespace: suite.legsNS, Service: newServiceName, CreatedInRun: true}}
	},
	Measure: func(ctx context.Context, w *newServiceWorkload, run *evidence.Run) {
		if err := measureNewService(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

func prepareNewService(ctx context.Context) (*newServiceWorkload, error) {
	node := suite.cluster.Workers()[0].Name
	w := &newServiceWorkload{meshed: suite.clientOn(node)}
	if w.meshed == nil {
		return nil, fmt.Errorf("no meshed client on %s", node)
	}
	plain, err := workload.Recreate(ctx, suite.cluster, workload.PlainClient(suite.legsNS, "plain-"+node, node, "plain"))
	if err != nil {
		return nil, err
	}
	w.plain = &plain[0]
	// A kept cluster may hold an interrupted run's Services: a creation must be one.
	for _, name := range []string{newServiceName, newServiceTwin} {
		if err := suite.cluster.DeleteService(ctx, suite.legsNS, name, time.Minute); err != nil {
			return nil, err
		}
	}
	dep := workload.EchoDeployment(suite.legsNS, "newsvc", workload.Backends{Replicas: 2})
	if err := suite.cluster.Create(ctx, dep); err != nil {
		return nil, err
	}
	if _, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=newsvc", 2, 2*time.Minute); err != nil {
		return nil, err
	}
	w.selector = dep.Spec.Selector.MatchLabels
	ips, err := suite.cluster.FreeServiceIPs(ctx, 2)
	if err != nil {
		return nil, err
	}
	w.agentIP, w.twinIP = ips[0].String(), ips[1].String()
	return w, nil
}

// untilReply is one client's probe of one address.
type untilReply struct {
	client  *corev1.Pod
	to      string
	within  time.Duration // the probe's bound
	started chan struct{} // closed at the probe's first attempt
	rs      []echo.Timed
	err     error
}

func (u *untilReply) run(ctx context.Context, wg *sync.WaitGroup) {
	u.started = make(chan struct{})
	var once sync.Once
	wg.Go(func() {
		defer once.Do(func() { close(u.started) }) // a probe that failed to start
		u.rs, u.err = workload.DialUntilReply(ctx, suite.cluster, u.client, u.to,
			workload.DialOptions{Interval: newServiceInterval, Timeout: newServiceAttempt}, u.within,
			func(echo.Timed) { once.Do(func() { close(u.started) }) })
	})
}

// firstReply is the attempt that got the first reply, and the attempt
// before it (nil when there is none).
func (u *untilReply) firstReply() (first, prev *echo.Timed) {
	for i := range u.rs {
		if u.rs[i].OK {
			if i > 0 {
				prev = &u.rs[i-1]
			}
			return &u.rs[i], prev
		}
	}
	return nil, nil
}

// describe says when the first reply came, relative to created: the start
// of the attempt that got it, or the reply itself for an attempt started
// before the creation (ms < 0: none; a reply never precedes the creation).
func (u *untilReply) describe(created time.Time, path string) (string, float64) {
	first, prev := u.firstReply()
	if first == nil {
		return fmt.Sprintf("%s: no reply in %d attempts over %s", path, len(u.rs), u.within), -1
	}
	ms := float64(first.Start.Sub(created).Microseconds()) / 1000
	if first.Start.Before(created) {
		// In flight at the creation: a SYN to an address nothing served yet
		// was retransmitted once the Service was programmed. Its start says
		// nothing; its reply is when the Service answered.
		ms += first.Millis
		if ms < 0 {
			// Nothing new can answer before it exists: an old Service at the
			// address did (waitUnrouted should have prevented it).
			return fmt.Sprintf("%s: a reply %.0f ms before the Service's creation, from whatever still held the address", path, -ms), -1
		}
		return fmt.Sprintf("%s: first reply %.0f ms after the Service's creation, to an attempt started %.0f ms before it (a retransmitted SYN)",
			path, ms, -float64(first.Start.Sub(created).Microseconds())/1000), ms
	}
	s := fmt.Sprintf("%s: first reply from the attempt started %.0f ms after the Service's creation", path, ms)
	switch {
	case prev != nil && !prev.Start.Before(created):
		s += fmt.Sprintf(" (the one before, at %.0f ms, %s)", float64(prev.Start.Sub(created).Microseconds())/1000, echo.Outcome(prev.Result))
	case len(u.rs) > 0 && !u.rs[0].Start.Before(created):
		s += " (an upper bound: the probe's first attempt started after the creation)"
	}
	return s, ms
}

func measureNewService(ctx context.Context, w *newServiceWorkload, run *evidence.Run) error {
	node := w.meshed.Spec.NodeName
	defer func() {
		// The next run, and the next suite on a kept cluster, start without them.
		ctx := context.WithoutCancel(ctx)
		for _, name := range []string{newServiceName, newServiceTwin} {
			if err := suite.cluster.DeleteService(ctx, suite.legsNS, name, time.Minute); err != nil {
				run.Notes = append(run.Notes, "cleanup: "+err.Error())
			}
		}
	}()
	stat := proxy.ClusterStat(contract.StatName(suite.legsNS, newServiceName, 80), proxy.UpstreamCxTotal)
	before, err := nodeStats(ctx, []string{node})
	if err != nil {
		return err
	}

	// The previous run's Services at these addresses are gone from the API,
	// but kube-proxy drops them a sync later: a probe started before would
	// be answered by the old twin.
	if err := waitUnrouted(ctx, node, w.agentIP, w.twinIP); err != nil {
		return err
	}

	// Both probes run before the Services exist, so that the first reply
	// measures the programming, not the exec's start.
	agentProbe := &untilReply{client: w.meshed, to: w.agentTo(), within: newServiceMeshedWithin}
	twinProbe := &untilReply{client: w.plain, to: w.twinTo(), within: newServiceWithin}
	var wg sync.WaitGroup
	agentProbe.run(ctx, &wg)
	twinProbe.run(ctx, &wg)
	<-agentProbe.started
	<-twinProbe.started

	created := map[string]time.Time{}
	var cut *corev1.Service
	for _, s := range []struct {
		name, ip string
		cut      bool
	}{{newServiceTwin, w.twinIP, false}, {newServiceName, w.agentIP, true}} {
		svc := workload.Service(suite.legsNS, s.name, workload.ServiceOptions{Selector: w.selector, Cut: s.cut,
			Mutate: func(svc *corev1.Service) { svc.Spec.ClusterIP = s.ip }})
		created[s.name] = time.Now()
		got, err := suite.cluster.CreateService(ctx, svc, 30*time.Second)
		if err != nil {
			wg.Wait()
			return err
		}
		if s.cut {
			cut = got
		}
	}
	wg.Wait()
	if err := errors.Join(agentProbe.err, twinProbe.err); err != nil {
		return err
	}
	// The meshed probe's attempts are the run's too (the twin's take
	// kube-proxy's path, not the capture: the reference, timed only).
	for _, r := range agentProbe.rs {
		run.Tally([]echo.Result{r.Result}, suite.cluster.Zone)
	}

	// Afterwards, with the Service cut on every node: only the agent can
	// answer the meshed client.
	cutNote, err := guard.WaitCut(ctx, suite.cluster, cut, time.Minute)
	if err != nil {
		return err
	}
	steady, err := workload.Dial(ctx, suite.cluster, w.meshed, w.agentTo(), workload.Quick)
	if err != nil {
		return err
	}
	run.Tally(steady, suite.cluster.Zone)
	after, err := nodeStats(ctx, []string{node})
	if err != nil {
		return err
	}
	throughAgent := statDelta(before, after, node, stat)

	agentNote, agentMs := agentProbe.describe(created[newServiceName], "meshed client → "+newServiceName+" at "+w.agentTo()+" (cut)")
	twinNote, twinMs := twinProbe.describe(created[newServiceTwin], "plain client → "+newServiceTwin+" at "+w.twinTo()+" (kube-proxy)")
	run.Counters = map[string]float64{stat + " on " + node: float64(throughAgent)}
	// Only times measured: "no reply" is in the notes, not a number.
	if agentMs >= 0 {
		run.Counters["first reply after creation, ms: meshed → "+newServiceName] = math.Round(agentMs)
	}
	if twinMs >= 0 {
		run.Counters["first reply after creation, ms: plain → "+newServiceTwin] = math.Round(twinMs)
	}
	run.Notes = append(run.Notes, agentNote, twinNote, "after: "+cutNote)
	steadyOK := len(steady) > 0 && echo.Replies(steady) == len(steady)
	run.MetGreen = agentMs >= 0 && throughAgent >= 1 && twinMs >= 0 && steadyOK
	// Red claims what redExpect says, no more: kube-proxy programs a new
	// Service too, and the guard can only cut it once it is there, so a
	// meshed attempt that lands in between is answered by kube-proxy (the
	// probe stops at that reply, before WaitCut above). What red excludes is
	// any reply through the agent, and any once the Service is cut.
	run.MetRed = throughAgent == 0 && len(steady) > 0 && echo.Replies(steady) == 0
	if run.Mode == evidence.Red && agentMs >= 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("the meshed probe's reply at %.0f ms came through kube-proxy before the guard had cut the new Service (no svc: cluster: %s +%d)", agentMs, stat, throughAgent))
	}
	run.Summary = fmt.Sprintf("first reply after creation: %s through the meshed client, %s through kube-proxy (twin); %s +%d; once cut: %d/%d replies; all attempts: %s",
		msOrNone(agentMs), msOrNone(twinMs), stat, throughAgent, echo.Replies(steady), len(steady), run.Counts())
	return nil
}

// waitUnrouted waits until kube-proxy's table on node routes none of ips:
// no ClusterIP element of a Service at them, as guard.KubeProxyOnPath reads
// it (a guard's cut element routes nothing).
func waitUnrouted(ctx context.Context, node string, ips ...string) error {
	at := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIPs: ips}}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		table, err := guard.KubeProxyTable(ctx, suite.cluster, node)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if on := guard.KubeProxyOnPath(table, at); len(on) > 0 {
			last = fmt.Sprintf("kube-proxy on %s still routes %v: %v", node, ips, on)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", last, err)
	}
	return nil
}

func msOrNone(ms float64) string {
	if ms < 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f ms", ms)
}
