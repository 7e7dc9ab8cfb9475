package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

const (
	// proxyAdminPort is the node proxy's admin on the node's loopback
	// (Envoy's and the built-in proxy's alike).
	proxyAdminPort = 9901

	onDemandRefusedMetric = "svclb_ondemand_refused_total"

	// onDemandTimeout is translate.OnDemandTimeout, the tcp_proxy
	// on_demand timeout the agent sets: how long a connection to a name the
	// agent never admits is held before the proxy closes it (NC).
	onDemandTimeout = 5 * time.Second
	// onDemandDialTimeout outlasts onDemandTimeout, so the client sees the
	// proxy's close and not its own deadline.
	onDemandDialTimeout = onDemandTimeout + 3*time.Second
)

type onDemandWorkload struct {
	client      *corev1.Pod // the one meshed client that dials
	svc, idle   *corev1.Service
	to, noSvcTo string
	// cluster and idleCluster are the svc: cluster names of the dialled
	// Service and of one nobody dials.
	cluster, idleCluster string
}

// on-demand: in the agent's on-demand CDS mode a node's proxy holds only the
// clusters its pods dialled (ODCDS over ADS), and a connection to a name not
// yet known is held while the proxy asks instead of being refused.
var _ = defineLeg(leg{
	name: "on-demand",
	setup: "ClusterIP Service (2 echo backends, kube-proxy objects deleted) and a second Service nobody dials; one meshed client on a worker; " +
		"green also sets the agent's ConfigMap cds=on-demand (restored to proactive after the leg)",
	redExpect: "no backend reply (passthrough to the VIP hits kube-proxy's REJECT); nothing demanded, nothing refused on demand",
	greenMeans: "before any connection the node's proxy has no cluster for the Service; the first connection is held while the proxy asks and gets a reply; " +
		"then the agent's demanded count rose and the proxy holds the dialled Service's cluster but not the undialled one's (nor do other nodes' proxies); " +
		fmt.Sprintf("a dial to an unallocated Service-range address is held ~%s then closed, and %s{reason=\"no-service\"} rises", onDemandTimeout, onDemandRefusedMetric),
	agentConfig: func(on bool) map[string]string {
		if on {
			return map[string]string{"cds": "on-demand"}
		}
		return map[string]string{"cds": "proactive"}
	},
	prepare: func(ctx context.Context) (any, error) {
		node := workers()[0].Name
		wl := &onDemandWorkload{}
		for i := range suite.clients {
			if suite.clients[i].Spec.NodeName == node {
				wl.client = &suite.clients[i]
			}
		}
		if wl.client == nil {
			return nil, fmt.Errorf("no meshed client on %s", node)
		}
		svc, err := deployEcho(ctx, "od", backendOpts{replicas: 2}, svcOpts{guarded: true})
		if err != nil {
			return nil, err
		}
		idle := legService("od-idle", svcOpts{selector: map[string]string{"app": "od"}})
		if err := create(ctx, idle); err != nil {
			return nil, err
		}
		ip, err := unallocatedServiceIP(ctx)
		if err != nil {
			return nil, err
		}
		wl.svc, wl.idle = svc, idle
		wl.to = net.JoinHostPort(svc.Spec.ClusterIP, "80")
		wl.noSvcTo = net.JoinHostPort(ip.String(), "80")
		wl.cluster, wl.idleCluster = "svc:"+wl.to, "svc:"+net.JoinHostPort(idle.Spec.ClusterIP, "80")
		return wl, nil
	},
	measure: measureOnDemand,
})

// onDemandState is what the leg reads from the dialling node before and
// after the connections.
type onDemandState struct {
	status   *agentStatus
	refused  float64 // svclb_ondemand_refused_total{reason="no-service"}
	clusters map[string]bool
	stats    map[string]int64 // the proxy's /stats
}

func readOnDemandState(ctx context.Context, agentPod, node string) (*onDemandState, error) {
	st, err := getAgentStatus(ctx, agentPod)
	if err != nil {
		return nil, err
	}
	m, err := agentMetrics(ctx, agentPod)
	if err != nil {
		return nil, err
	}
	cl, err := proxyClusters(ctx, node)
	if err != nil {
		return nil, err
	}
	b, err := suite.cluster.NodeGet(ctx, node, proxyAdminPort, "/stats")
	if err != nil {
		return nil, fmt.Errorf("node proxy admin: %w", err)
	}
	stats, err := parseStats(b)
	if err != nil {
		return nil, fmt.Errorf("node proxy /stats on %s: %w", node, err)
	}
	return &onDemandState{status: st, refused: m.Sum(onDemandRefusedMetric, map[string]string{"reason": "no-service"}), clusters: cl, stats: stats}, nil
}

// The cap_svc tcp_proxy's on-demand counters (Envoy's names,
// source/common/tcp_proxy/tcp_proxy.h ALL_TCP_PROXY_STATS).
const (
	statOnDemandSuccess = "tcp.cap_svc.on_demand_cluster_success"
	statOnDemandTimeout = "tcp.cap_svc.on_demand_cluster_timeout"
)

// parseStats reads Envoy's /stats text format, "name: value" per line; lines
// whose value is not an integer (histograms) are skipped.
func parseStats(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[name] = n
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no counters in %s", truncate(string(b), 200))
	}
	return out, nil
}

func measureOnDemand(ctx context.Context, w any, run *evidence.Run) {
	wl := w.(*onDemandWorkload)
	node := wl.client.Spec.NodeName
	fail := func(err error) { run.Error = err.Error() }
	agent, err := agentPodOn(ctx, node)
	if err != nil {
		fail(err)
		return
	}
	before, err := readOnDemandState(ctx, agent, node)
	if err != nil {
		fail(err)
		return
	}
	// The first connection to the Service and one to the unallocated address
	// go at once: each may be held for up to the on-demand timeout, and they
	// ask for different names.
	rss, err := dialAll(ctx, []dialJob{
		{client: wl.client, to: wl.to, o: dialOpts{count: 1, timeout: onDemandDialTimeout}},
		{client: wl.client, to: wl.noSvcTo, o: dialOpts{count: 1, timeout: onDemandDialTimeout}},
	}, 2)
	if err != nil {
		fail(err)
		return
	}
	first, noSvc := rss[0], rss[1]
	more, err := dial(ctx, wl.client, wl.to, quick)
	if err != nil {
		fail(err)
		return
	}
	tally(run, first)
	tally(run, more)
	// The agent counts the refusal when the proxy's request arrives, long
	// before the proxy gives up; allow a moment for the scrape anyway.
	var after *onDemandState
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if after, err = readOnDemandState(ctx, agent, node); err != nil {
			fail(err)
			return
		}
		if after.refused > before.refused || time.Now().After(deadline) {
			break
		}
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
		persisted, persistNote, rs, err = checkPersistedDemand(ctx, wl, agent)
		if err != nil {
			fail(err)
			return
		}
		tally(run, rs)
	}
	known, err := knownServicePorts(ctx)
	if err != nil {
		fail(err)
		return
	}

	heldOnce := after.stats[statOnDemandSuccess] - before.stats[statOnDemandSuccess]
	timedOut := after.stats[statOnDemandTimeout] - before.stats[statOnDemandTimeout]
	refusedRose := after.refused - before.refused
	demandedRose := after.status.Demanded - before.status.Demanded
	run.Counters = map[string]float64{
		fmt.Sprintf("%s{reason=%q} on %s", onDemandRefusedMetric, "no-service", node): refusedRose,
		"agent /status demanded on " + node:                                           float64(demandedRose),
		statOnDemandSuccess + " on " + node:                                           float64(heldOnce),
		statOnDemandTimeout + " on " + node:                                           float64(timedOut),
	}
	firstOK := len(first) == 1 && first[0].OK
	held, heldOK := onDemandHeld(noSvc)
	onDemand := before.status.CDS == "on-demand" && after.status.CDS == "on-demand"
	run.MetGreen = onDemand &&
		!before.clusters[wl.cluster] && // nothing asked for it yet
		firstOK && run.Replies == run.Attempts && heldOnce >= 1 &&
		after.status.Demanded >= 1 && demandedRose >= 1 &&
		after.clusters[wl.cluster] && !after.clusters[wl.idleCluster] && len(elsewhere) == 0 &&
		heldOK && timedOut >= 1 && refusedRose >= 1 && persisted
	run.MetRed = run.Attempts > 0 && run.Replies == 0 && demandedRose <= 0 && refusedRose == 0
	run.Summary = fmt.Sprintf("%s; cds %s; %s before: %s, after: %s; demanded %d→%d; unallocated VIP: %s after %s; %s{no-service} +%g",
		countsSummary(run), orNone(after.status.CDS), wl.cluster, holding(before.clusters[wl.cluster]), holding(after.clusters[wl.cluster]),
		before.status.Demanded, after.status.Demanded, outcomeOf(noSvc), held.Round(100*time.Millisecond), onDemandRefusedMetric, refusedRose)
	if len(first) == 1 {
		run.Notes = append(run.Notes, fmt.Sprintf("first connection: %s in %.0f ms", outcome(first[0]), first[0].Millis))
	}
	run.Notes = append(run.Notes,
		fmt.Sprintf("%s's proxy: %d svc: clusters before, %d after (undialled %s: %s); pending %d→%d",
			node, countSvc(before.clusters), countSvc(after.clusters), wl.idleCluster, holding(after.clusters[wl.idleCluster]),
			before.status.Pending, after.status.Pending))
	run.Notes = append(run.Notes, fmt.Sprintf("bounded: %s's proxy holds %d svc: cluster(s); the cluster has %d Service ports (proactive mode publishes all of them)",
		node, countSvc(after.clusters), known))
	if persistNote != "" {
		run.Notes = append(run.Notes, persistNote)
	}
	if len(elsewhere) > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%s also on %s, whose pods never dialled it", wl.cluster, strings.Join(elsewhere, ", ")))
	}
}

// demandDir is where the agent's --demand-file lives by default
// (/var/lib/svclb/demand.json): a hostPath, so the demand outlives the pod.
const demandDir = "/var/lib/svclb"

// checkPersistedDemand deletes the node DaemonSet's pod on the dialling node
// and checks, before any new connection, that the new agent reports the
// demand (demanded ≥ 1) and the new proxy holds the dialled Service's cluster
// (its wildcard CDS subscription received the persisted name); then, once the
// client's capture listener is bound again, that a connection gets a reply.
// It returns ok=true with a note when the DaemonSet mounts no demandDir from
// the host: the check cannot pass there, and the note says why it did not run.
func checkPersistedDemand(ctx context.Context, wl *onDemandWorkload, oldPod string) (ok bool, note string, rs []echo.Result, err error) {
	node := wl.client.Spec.NodeName
	mounted, err := nodeMountsHostDir(ctx, demandDir)
	if err != nil {
		return false, "", nil, err
	}
	if !mounted {
		return true, fmt.Sprintf("persisted demand NOT checked: DaemonSet %s mounts no hostPath %s into the agent (fixtures/manifests)", nodeDaemonSet, demandDir), nil, nil
	}
	t0 := time.Now()
	if err := suite.cluster.CS.CoreV1().Pods(systemNS).Delete(ctx, oldPod, metav1.DeleteOptions{}); err != nil {
		return false, "", nil, fmt.Errorf("delete %s: %w", oldPod, err)
	}
	var pod string
	var st *agentStatus
	var cl map[string]bool
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if pod, err = agentPodOn(ctx, node); err != nil || pod == oldPod {
			last = fmt.Sprintf("no new %s pod on %s yet", nodeDaemonSet, node)
			return false, nil
		}
		if st, err = getAgentStatus(ctx, pod); err != nil {
			last = err.Error()
			return false, nil
		}
		if cl, err = proxyClusters(ctx, node); err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("agent %s: cds %s, demanded %d; proxy holds %s: %v", pod, st.CDS, st.Demanded, wl.cluster, cl[wl.cluster])
		return st.CDS == "on-demand" && st.Demanded >= 1 && cl[wl.cluster], nil
	})
	restarted := time.Since(t0)
	if err != nil {
		return false, fmt.Sprintf("after deleting %s: %s", oldPod, last), nil, nil
	}
	if err := waitListenerBound(ctx, node, "capture~"+wl.client.Namespace+"~"+wl.client.Name); err != nil {
		return false, "", nil, err
	}
	rs, err = dial(ctx, wl.client, wl.to, dialOpts{count: 1, timeout: onDemandDialTimeout})
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
	ds, err := suite.cluster.CS.AppsV1().DaemonSets(systemNS).Get(ctx, nodeDaemonSet, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get daemonset %s: %w", nodeDaemonSet, err)
	}
	host := map[string]bool{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == dir {
			host[v.Name] = true
		}
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "agent" {
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

// waitListenerBound waits until the node proxy on node reports the listener
// bound (admin /listeners?format=json).
func waitListenerBound(ctx context.Context, node, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := suite.cluster.NodeGet(ctx, node, proxyAdminPort, "/listeners?format=json")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var ls struct {
			Statuses []struct {
				Name  string `json:"name"`
				Bound bool   `json:"bound"`
				Error string `json:"error"`
			} `json:"listener_statuses"`
		}
		if err := json.Unmarshal(b, &ls); err != nil {
			return false, fmt.Errorf("node proxy /listeners on %s: %w", node, err)
		}
		for _, l := range ls.Statuses {
			if l.Name == name {
				last = fmt.Sprintf("bound %v %s", l.Bound, l.Error)
				return l.Bound, nil
			}
		}
		last = "not listed"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("listener %s on %s: %w (%s)", name, node, err, last)
	}
	return nil
}

// knownServicePorts counts the TCP ports of IPv4 ClusterIP Services in the
// cluster: what proactive mode publishes to every node.
func knownServicePorts(ctx context.Context) (int, error) {
	svcs, err := suite.cluster.CS.CoreV1().Services(corev1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list Services: %w", err)
	}
	n := 0
	for _, s := range svcs.Items {
		ip, err := netip.ParseAddr(s.Spec.ClusterIP)
		if err != nil || !ip.Is4() {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Protocol == corev1.ProtocolTCP {
				n++
			}
		}
	}
	return n, nil
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
	return d, outcome(rs[0]) == "proxy-closed" && d >= onDemandTimeout-time.Second && d < onDemandTimeout+2*time.Second
}

func outcomeOf(rs []echo.Result) string {
	if len(rs) != 1 {
		return fmt.Sprintf("%d results", len(rs))
	}
	return outcome(rs[0])
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
		if strings.HasPrefix(c, "svc:") {
			n++
		}
	}
	return n
}

// agentPodOn names the node DaemonSet's pod on node.
func agentPodOn(ctx context.Context, node string) (string, error) {
	pods, err := agentPods(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if p.Spec.NodeName == node {
			return p.Name, nil
		}
	}
	return "", fmt.Errorf("no %s pod on %s", nodeDaemonSet, node)
}

// nodesHolding lists the nodes other than except whose proxy holds cluster.
func nodesHolding(ctx context.Context, cluster, except string) ([]string, error) {
	var out []string
	for _, n := range suite.nodes {
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
	sort.Strings(out)
	return out, nil
}

// proxyClusters is the set of cluster names (active and warming) the node
// proxy on node holds, from its admin /config_dump.
func proxyClusters(ctx context.Context, node string) (map[string]bool, error) {
	b, err := suite.cluster.NodeGet(ctx, node, proxyAdminPort, "/config_dump")
	if err != nil {
		return nil, fmt.Errorf("node proxy admin: %w", err)
	}
	cl, err := decodeClusters(b)
	if err != nil {
		return nil, fmt.Errorf("node proxy /config_dump on %s: %w", node, err)
	}
	return cl, nil
}

// decodeClusters reads cluster names from either /config_dump: the built-in
// proxy's summary ({"clusters":[{"name":…}]}) or Envoy's, whose
// ClustersConfigDump lists static, dynamic active and dynamic warming
// clusters (api/envoy/admin/v3/config_dump_shared.proto).
func decodeClusters(b []byte) (map[string]bool, error) {
	type named struct {
		Name string `json:"name"`
	}
	type wrapped struct {
		Cluster named `json:"cluster"`
	}
	var d struct {
		Clusters []named `json:"clusters"`
		Configs  []struct {
			Type    string    `json:"@type"`
			Static  []wrapped `json:"static_clusters"`
			Active  []wrapped `json:"dynamic_active_clusters"`
			Warming []wrapped `json:"dynamic_warming_clusters"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, c := range d.Clusters {
		out[c.Name] = true
	}
	for _, c := range d.Configs {
		if !strings.HasSuffix(c.Type, ".ClustersConfigDump") {
			continue
		}
		for _, l := range [][]wrapped{c.Static, c.Active, c.Warming} {
			for _, w := range l {
				out[w.Cluster.Name] = true
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no clusters in %s", truncate(string(b), 200))
	}
	return out, nil
}
