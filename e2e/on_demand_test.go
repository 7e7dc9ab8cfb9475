package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	// onDemandTimeout is how long the proxy holds a connection to a name the
	// agent never admits before it closes it (NC): the tcp_proxy on_demand
	// timeout the agent sets.
	onDemandTimeout = translate.OnDemandTimeout
	// onDemandDialTimeout outlasts onDemandTimeout, so the client sees the
	// proxy's close and not its own deadline.
	onDemandDialTimeout = onDemandTimeout + 3*time.Second
)

// The cap_svc tcp_proxy's on-demand counters (fixtures/proxy names them).
var (
	statOnDemandAttempt = proxy.TCPStat(contract.ChainSvc, proxy.OnDemandClusterAttempt)
	statOnDemandSuccess = proxy.TCPStat(contract.ChainSvc, proxy.OnDemandClusterSuccess)
	statOnDemandTimeout = proxy.TCPStat(contract.ChainSvc, proxy.OnDemandClusterTimeout)
)

type onDemandWorkload struct {
	svc         *corev1.Service // the dialled Service
	client      *corev1.Pod     // the one meshed client that dials
	to, noSvcTo string
	// cluster and idleCluster are the svc: cluster names of the dialled
	// Service and of one nobody dials.
	cluster, idleCluster string
}

// on-demand: in the agent's on-demand CDS mode a node's proxy holds only the
// clusters its pods dialled (ODCDS over ADS), and a connection to a name not
// yet known is held while the proxy asks instead of being refused.
var _ = leg.Define(legs, leg.Leg[*onDemandWorkload]{
	Name:  "on-demand",
	Needs: leg.Needs{Workers: 1},
	Workloads: "Service od (2 echo backends, cut), Service od-idle (never dialled), the client on the first worker; green sets ConfigMap " +
		"cds=on-demand",
	Exercises: "agent/settings.go (cds), admission.go, pending.go, demandfile.go (on-demand CDS, persisted demand), agent/metrics.go " +
		"(svclb_ondemand_refused_total), internal/translate/listener.go (tcp_proxy on_demand, OnDemandTimeout), nodeproxy/ondemand.go",
	Setup: "ClusterIP Service (2 echo backends, kube-proxy ClusterIP entries deleted) and a second Service nobody dials; one meshed client on a worker; " +
		"green also sets the agent's ConfigMap cds=on-demand (restored to proactive after the leg)",
	RedExpect: "no backend reply (passthrough to the VIP hits kube-proxy's REJECT); nothing demanded, nothing refused on demand",
	GreenMeans: "before any connection the node's proxy has no cluster for the Service; the first connection is held while the proxy asks and gets a reply; " +
		"then the agent's demanded count rose and the proxy holds the dialled Service's cluster but not the undialled one's (nor do other nodes' proxies); " +
		fmt.Sprintf("a dial to an unallocated Service-range address is held ~%s then closed, and %s{reason=%q} rises", onDemandTimeout, agent.OnDemandRefusedMetric, agent.ReasonNoService),
	AgentConfig: func(on bool) map[string]string {
		if on {
			return map[string]string{contract.KeyCDS: string(agentstatus.CDSOnDemand)}
		}
		return map[string]string{contract.KeyCDS: string(agentstatus.CDSProactive)}
	},
	Chance: fmt.Sprintf("nothing statistical: every connection to the Service must be answered, the first one held up to %s while the proxy asks "+
		"(onDemandDialTimeout outlasts the proxy's %s on-demand timeout, so the client sees the proxy's close, not its own deadline); later ones within %s (workload.AttemptTimeout); "+
		"the unallocated address must be closed %s ±1 s after it was dialled", onDemandDialTimeout, onDemandTimeout, workload.AttemptTimeout, onDemandTimeout),
	// The persisted-demand check restarts the client node's DaemonSet pod:
	// it banks that node's counters first (beforeNodeRestart).
	Services: func(wl *onDemandWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(wl.svc, 80)}
	},
	Prepare: func(ctx context.Context) (*onDemandWorkload, error) {
		node := suite.cluster.Workers()[0].Name
		wl := &onDemandWorkload{client: suite.clientOn(node)}
		if wl.client == nil {
			return nil, fmt.Errorf("no meshed client on %s", node)
		}
		svc, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "od", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true})
		if err != nil {
			return nil, err
		}
		idle := workload.Service(suite.legsNS, "od-idle", workload.ServiceOptions{Selector: svc.Spec.Selector})
		if err := suite.cluster.Create(ctx, idle); err != nil {
			return nil, err
		}
		ip, err := suite.cluster.UnallocatedServiceIP(ctx)
		if err != nil {
			return nil, err
		}
		wl.svc, wl.to = svc, workload.Addr(svc, 80)
		wl.noSvcTo = net.JoinHostPort(ip.String(), "80")
		wl.cluster = contract.ClusterPrefix + wl.to
		wl.idleCluster = contract.ClusterPrefix + workload.Addr(idle, 80)
		return wl, nil
	},
	Measure: measureOnDemand,
})

// onDemandState is what the leg reads from the dialling node before and
// after the connections.
type onDemandState struct {
	status   *agentstatus.Status
	refused  float64 // svclb_ondemand_refused_total{reason="no-service"}
	clusters map[string]bool
	stats    map[string]int64 // the proxy's /stats
}

func readOnDemandState(ctx context.Context, agentPod, node string) (*onDemandState, error) {
	st, err := agent.Status(ctx, suite.cluster, agentPod)
	if err != nil {
		return nil, err
	}
	m, err := agent.Metrics(ctx, suite.cluster, agentPod)
	if err != nil {
		return nil, err
	}
	cl, err := proxyClusters(ctx, node)
	if err != nil {
		return nil, err
	}
	stats, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return nil, err
	}
	refused := m.Sum(agent.OnDemandRefusedMetric, map[string]string{"reason": agent.ReasonNoService})
	return &onDemandState{status: st, refused: refused, clusters: cl, stats: stats}, nil
}

// proxyClusters is the set of cluster names the node proxy on node holds.
func proxyClusters(ctx context.Context, node string) (map[string]bool, error) {
	d, err := proxy.ConfigDump(ctx, suite.cluster, node)
	if err != nil {
		return nil, err
	}
	return proxy.Clusters(d)
}

func measureOnDemand(ctx context.Context, wl *onDemandWorkload, run *evidence.Run) {
	node := wl.client.Spec.NodeName
	fail := func(err error) { run.Error = err.Error() }
	agentPod, err := agent.PodOn(ctx, suite.cluster, node)
	if err != nil {
		fail(err)
		return
	}
	before, err := readOnDemandState(ctx, agentPod, node)
	if err != nil {
		fail(err)
		return
	}
	// The first connection to the Service and one to the unallocated address
	// go at once: each may be held for up to the on-demand timeout, and they
	// ask for different names.
	held := workload.DialOptions{Count: 1, Timeout: onDemandDialTimeout}
	rss, err := workload.DialAll(ctx, suite.cluster, []workload.DialJob{
		{Client: wl.client, To: wl.to, Opts: held},
		{Client: wl.client, To: wl.noSvcTo, Opts: held},
	}, 2)
	if err != nil {
		fail(err)
		return
	}
	first, noSvc := rss[0], rss[1]
	more, err := workload.Dial(ctx, suite.cluster, wl.client, wl.to, workload.Quick)
	if err != nil {
		fail(err)
		return
	}
	run.Tally(first, suite.cluster.Zone)
	run.Tally(more, suite.cluster.Zone)
	// The agent counts the refusal when the proxy's request arrives, long
	// before the proxy gives up; wait for it only where the proxy asked (its
	// on_demand_cluster_attempt rose): with nothing asked (red) there is
	// nothing to count. Reads use the leg's ctx: one in flight at the end
	// must complete.
	var after *onDemandState
	var readErr error
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, measure.CountersSettle, true, func(context.Context) (bool, error) {
		if after, readErr = readOnDemandState(ctx, agentPod, node); readErr != nil {
			return false, readErr
		}
		return after.refused > before.refused || after.stats[statOnDemandAttempt] == before.stats[statOnDemandAttempt], nil
	})
	if readErr != nil || after == nil {
		fail(fmt.Errorf("reading %s after the connections: %v", node, readErr))
		return
	}
	elsewhere, err := nodesHolding(ctx, wl.cluster, node)
	if err != nil {
		fail(err)
		return
	}

	// Persisted demand, checked only where there is demand to persist (so
	// never in a run that admitted nothing) and a demand file that outlives
	// the pod.
	persisted, persistNote := true, ""
	if after.clusters[wl.cluster] && after.status.Demanded >= 1 {
		var rs []echo.Result
		persisted, persistNote, rs, err = checkPersistedDemand(ctx, wl, agentPod)
		if err != nil {
			fail(err)
			return
		}
		run.Tally(rs, suite.cluster.Zone)
	}
	known, err := suite.cluster.ServicePorts(ctx)
	if err != nil {
		fail(err)
		return
	}

	heldOnce := after.stats[statOnDemandSuccess] - before.stats[statOnDemandSuccess]
	timedOut := after.stats[statOnDemandTimeout] - before.stats[statOnDemandTimeout]
	refusedRose := after.refused - before.refused
	demandedRose := after.status.Demanded - before.status.Demanded
	run.Counters = map[string]float64{
		fmt.Sprintf("%s{reason=%q} on %s", agent.OnDemandRefusedMetric, agent.ReasonNoService, node): refusedRose,
		"agent /status demanded on " + node: float64(demandedRose),
		statOnDemandSuccess + " on " + node: float64(heldOnce),
		statOnDemandTimeout + " on " + node: float64(timedOut),
	}
	firstOK := len(first) == 1 && first[0].OK
	heldFor, heldOK := onDemandHeld(noSvc)
	onDemand := before.status.CDS == agentstatus.CDSOnDemand && after.status.CDS == agentstatus.CDSOnDemand
	run.MetGreen = onDemand &&
		!before.clusters[wl.cluster] && // nothing asked for it yet
		firstOK && run.Replies == run.Attempts && heldOnce >= 1 &&
		after.status.Demanded >= 1 && demandedRose >= 1 &&
		after.clusters[wl.cluster] && !after.clusters[wl.idleCluster] && len(elsewhere) == 0 &&
		heldOK && timedOut >= 1 && refusedRose >= 1 && persisted
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && demandedRose <= 0 && refusedRose == 0
	run.Summary = fmt.Sprintf("%s; cds %s; %s before: %s, after: %s; demanded %d→%d; unallocated VIP: %s after %s; %s{%s} +%g",
		run.Counts(), orNone(string(after.status.CDS)), wl.cluster, holding(before.clusters[wl.cluster]), holding(after.clusters[wl.cluster]),
		before.status.Demanded, after.status.Demanded, outcomeOf(noSvc), heldFor.Round(100*time.Millisecond), agent.OnDemandRefusedMetric, agent.ReasonNoService, refusedRose)
	if len(first) == 1 {
		run.Notes = append(run.Notes, fmt.Sprintf("first connection: %s in %.0f ms", echo.Outcome(first[0]), first[0].Millis))
	}
	run.Notes = append(run.Notes,
		fmt.Sprintf("%s's proxy: %d svc: clusters before, %d after (undialled %s: %s); pending %d→%d",
			node, countSvc(before.clusters), countSvc(after.clusters), wl.idleCluster, holding(after.clusters[wl.idleCluster]),
			before.status.Pending, after.status.Pending),
		fmt.Sprintf("bounded: %s's proxy holds %d svc: cluster(s); the cluster has %d Service ports (proactive mode publishes all of them)",
			node, countSvc(after.clusters), known))
	if persistNote != "" {
		run.Notes = append(run.Notes, persistNote)
	}
	if len(elsewhere) > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%s also on %s, whose pods never dialled it", wl.cluster, strings.Join(elsewhere, ", ")))
	}
}

// checkPersistedDemand deletes the node DaemonSet's pod on the dialling node
// and checks, before any new connection, that the new agent reports the
// demand (demanded ≥ 1) and the new proxy holds the dialled Service's cluster
// (its wildcard CDS subscription received the persisted name); then, once the
// client's capture listener listens again in the client's netns, that a
// connection gets a reply. It returns ok=true with a note when the DaemonSet
// mounts no contract.DemandDir from the host: the check cannot pass there,
// and the note says why it did not run.
func checkPersistedDemand(ctx context.Context, wl *onDemandWorkload, oldPod string) (ok bool, note string, rs []echo.Result, err error) {
	node := wl.client.Spec.NodeName
	mounted, err := nodeMountsHostDir(ctx, contract.DemandDir)
	if err != nil {
		return false, "", nil, err
	}
	if !mounted {
		return true, fmt.Sprintf("persisted demand NOT checked: DaemonSet %s mounts no hostPath %s into the agent (fixtures/manifests)", contract.NodeDaemonSet, contract.DemandDir), nil, nil
	}
	if err := beforeNodeRestart(ctx, node); err != nil {
		return false, "", nil, err
	}
	t0 := time.Now()
	if err := suite.cluster.CS.CoreV1().Pods(contract.Namespace).Delete(ctx, oldPod, metav1.DeleteOptions{}); err != nil {
		return false, "", nil, fmt.Errorf("delete %s: %w", oldPod, err)
	}
	var pod string
	var st *agentstatus.Status
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if pod, err = agent.PodOn(ctx, suite.cluster, node); err != nil || pod == oldPod {
			last = fmt.Sprintf("no new %s pod on %s yet", contract.NodeDaemonSet, node)
			return false, nil
		}
		if st, err = agent.Status(ctx, suite.cluster, pod); err != nil {
			last = err.Error()
			return false, nil
		}
		cl, err := proxyClusters(ctx, node)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("agent %s: cds %s, demanded %d; proxy holds %s: %v", pod, st.CDS, st.Demanded, wl.cluster, cl[wl.cluster])
		return st.CDS == agentstatus.CDSOnDemand && st.Demanded >= 1 && cl[wl.cluster], nil
	})
	restarted := time.Since(t0)
	if err != nil {
		return false, fmt.Sprintf("after deleting %s: %s", oldPod, last), nil, nil
	}
	l, found := agent.Listener(st, wl.client.Namespace, wl.client.Name)
	if !found {
		return false, "", nil, fmt.Errorf("the new agent %s lists no capture listener for %s/%s", pod, wl.client.Namespace, wl.client.Name)
	}
	if err := proxy.WaitListening(ctx, suite.cluster, node, l.Netns, contract.CapturePort, time.Minute); err != nil {
		return false, "", nil, err
	}
	rs, err = workload.Dial(ctx, suite.cluster, wl.client, wl.to, workload.DialOptions{Count: 1, Timeout: onDemandDialTimeout})
	if err != nil {
		return false, "", nil, err
	}
	ok = len(rs) == 1 && rs[0].OK
	note = fmt.Sprintf("persisted demand: %s deleted; %.1fs later, before any new connection, the new agent reports demanded %d and the new proxy holds %s; then %s",
		oldPod, restarted.Seconds(), st.Demanded, wl.cluster, outcomeOf(rs))
	if len(rs) == 1 {
		note += fmt.Sprintf(" in %.0f ms", rs[0].Millis)
	}
	return ok, note, rs, nil
}

// nodeMountsHostDir reports whether the node DaemonSet's agent container
// mounts dir from a hostPath volume.
func nodeMountsHostDir(ctx context.Context, dir string) (bool, error) {
	ds, err := suite.cluster.CS.AppsV1().DaemonSets(contract.Namespace).Get(ctx, contract.NodeDaemonSet, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get daemonset %s: %w", contract.NodeDaemonSet, err)
	}
	host := map[string]bool{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == dir {
			host[v.Name] = true
		}
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != manifests.AgentContainer {
			continue
		}
		for _, m := range c.VolumeMounts {
			if host[m.Name] && m.MountPath == dir {
				return true, nil
			}
		}
	}
	return false, nil
}

// onDemandHeld says how long the proxy held the connection to a name the
// agent never admits, and whether that is the on-demand timeout: accepted,
// then closed by the proxy (not the client's deadline, not ECONNREFUSED)
// after about onDemandTimeout.
func onDemandHeld(rs []echo.Result) (time.Duration, bool) {
	if len(rs) != 1 {
		return 0, false
	}
	d := time.Duration(rs[0].Millis * float64(time.Millisecond))
	return d, echo.Outcome(rs[0]) == echo.OutcomeProxyClosed && d >= onDemandTimeout-time.Second && d < onDemandTimeout+2*time.Second
}

// nodesHolding lists the nodes other than except whose proxy holds cluster.
func nodesHolding(ctx context.Context, cluster, except string) ([]string, error) {
	var out []string
	for _, n := range suite.cluster.Nodes {
		if n.Name == except {
			continue
		}
		cl, err := proxyClusters(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		if cl[cluster] {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func outcomeOf(rs []echo.Result) string {
	if len(rs) != 1 {
		return fmt.Sprintf("%d results", len(rs))
	}
	return echo.Outcome(rs[0])
}

func holding(b bool) string {
	if b {
		return "present"
	}
	return "absent"
}

func orNone(s string) string {
	if s == "" {
		return "(not reported)"
	}
	return s
}

func countSvc(cl map[string]bool) int {
	n := 0
	for c := range cl {
		if strings.HasPrefix(c, contract.ClusterPrefix) {
			n++
		}
	}
	return n
}
