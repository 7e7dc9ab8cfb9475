package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The scan. The whole range × 200 ports is 13 million dials, hours on a 2-core VM; the leg
// scans a part that still overflows the pending bound 28 times: every address of the range on
// one port (the wide half: names spread over every address) and the first 256 addresses on
// 200 ports (the deep half: many names per address).
const (
	hostileScanWidePort  = 9999
	hostileScanDeepHosts = 256
	hostileScanDeepFrom  = 10000 // ports hostileScanDeepFrom … +hostileScanDeepPorts-1
	hostileScanDeepPorts = 200
	// hostileScanParallel dials at once; hostileScanDialTimeout bounds each: nothing in the
	// scan is meant to answer (red: kube-proxy drops unallocated ClusterIPs; green: the
	// proxy closes at once, or holds a pending name for the on-demand timeout).
	hostileScanParallel    = 512
	hostileScanDialTimeout = 300 * time.Millisecond
	// hostileScanRSS bounds the agent's resident memory after the scan (it holds at most
	// contract.OnDemandPendingMax names and a bit per address of the range).
	hostileScanRSS = 128 << 20
	// hostileScanServedWithin bounds the wait for the Service created after the scan.
	hostileScanServedWithin = 15 * time.Second
	// hostileScanSummaryWithin bounds the wait for the refusal log's summary line.
	hostileScanSummaryWithin = contract.LogSummaryInterval + 10*time.Second
	hostileScanService       = "hscan-late"
)

type hostileScanWorkload struct {
	scanner  *corev1.Pod
	selector map[string]string
	prefix   netip.Prefix // the Service range (its first IPv4 CIDR)
	lateIP   string       // where the Service created after the scan goes: scanned late, so not kept
}

func (w *hostileScanWorkload) lateTo() string {
	return net.JoinHostPort(w.lateIP, strconv.Itoa(hostileScanWidePort))
}

func (w *hostileScanWorkload) names() int {
	return (1<<(32-w.prefix.Bits()) - 1) + hostileScanDeepHosts*hostileScanDeepPorts
}

// hostile-scan: in on-demand CDS mode a meshed pod that scans the Service range makes the
// proxy ask for one name per address and port. The agent keeps at most
// contract.OnDemandPendingMax of them and answers the rest as not existing; a Service created
// afterwards at a scanned address is still served; the refusal log writes a bounded number of
// lines and summarises the rest.
var _ = leg.Define(legs, leg.Leg[*hostileScanWorkload]{
	Name:    "hostile-scan",
	Needs:   leg.Needs{Workers: 1},
	Control: true,
	Workloads: fmt.Sprintf("the first worker's meshed client scans the Service range: every address on port %d and the first %d addresses on ports %d-%d; "+
		"echo Deployment hscan (1 pod); per run Service %s (port %d, not cut) created after the scan at the highest free address; green sets ConfigMap cds=on-demand",
		hostileScanWidePort, hostileScanDeepHosts, hostileScanDeepFrom, hostileScanDeepFrom+hostileScanDeepPorts-1, hostileScanService, hostileScanWidePort),
	Exercises: "agent/pending.go, admission.go (the pending bound, forgotten addresses, re-checks by address), agent/internal/xdsserver/forget.go " +
		"(names answered removed), refusallog.go and internal/ratelog (refusal lines rate-limited), pkg/svcindex ChangesSince, nodeproxy/ondemand.go (Missing)",
	Setup: fmt.Sprintf("%d dials at once, %s each, from one meshed client; then a Service at a scanned address; red with the Phase flags off "+
		"(the scan passes through to kube-proxy, which drops unallocated ClusterIPs on the node), green with them on and cds=on-demand; "+
		"after each run the scanning node's DaemonSet pod is replaced, so what the scan left in its agent and proxy goes",
		hostileScanParallel, hostileScanDialTimeout),
	RedExpect: "same as green (control leg): the agent keeps nothing of a scan it does not see, and kube-proxy serves the new Service",
	GreenMeans: fmt.Sprintf("on the scanning node the agent's pending names stay at or under %d during and after the scan (/status, %s), its RSS stays under %d MiB; "+
		"the Service created after the scan at a scanned address replies within %s; the agent writes at most %d + %d/s refusal lines for the scanning pod per reason, "+
		"counts the rest in %s and summarises them within %s",
		contract.OnDemandPendingMax, contract.MetricOnDemandPending, hostileScanRSS>>20, hostileScanServedWithin, contract.RefusalLogBurst, contract.RefusalLogPerSecond,
		contract.MetricLogSuppressed, hostileScanSummaryWithin),
	AgentConfig: func(on bool) map[string]string {
		if on {
			return map[string]string{contract.KeyCDS: string(agentstatus.CDSOnDemand)}
		}
		return map[string]string{contract.KeyCDS: string(agentstatus.CDSProactive)}
	},
	Chance: fmt.Sprintf("nothing statistical: the bounds are the agent's, checked after a scan whose dials may fail as they like (%s each); "+
		"the new Service must reply within %s", hostileScanDialTimeout, hostileScanServedWithin),
	// No services: the leg judges what it reads itself; the per-Service counter checks would
	// tell red from green, which a control leg must not.
	Timeout: 15 * time.Minute,
	Prepare: prepareHostileScan,
	Measure: measureHostileScan,
})

func prepareHostileScan(ctx context.Context) (*hostileScanWorkload, error) {
	node := suite.cluster.Workers()[0].Name
	w := &hostileScanWorkload{scanner: suite.clientOn(node)}
	if w.scanner == nil {
		return nil, fmt.Errorf("no meshed client on %s", node)
	}
	if err := suite.cluster.DeleteService(ctx, suite.legsNS, hostileScanService, time.Minute); err != nil {
		return nil, err
	}
	dep := workload.EchoDeployment(suite.legsNS, "hscan", workload.Backends{Replicas: 1})
	if err := suite.cluster.Create(ctx, dep); err != nil {
		return nil, err
	}
	if _, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=hscan", 1, 2*time.Minute); err != nil {
		return nil, err
	}
	w.selector = dep.Spec.Selector.MatchLabels
	pod, err := agent.PodOn(ctx, suite.cluster, node)
	if err != nil {
		return nil, err
	}
	st, err := agent.Status(ctx, suite.cluster, pod)
	if err != nil {
		return nil, err
	}
	if len(st.Range) == 0 {
		return nil, fmt.Errorf("the agent on %s knows no Service range", node)
	}
	if w.prefix, err = netip.ParsePrefix(st.Range[0]); err != nil {
		return nil, err
	}
	// Red sends the scan through kube-proxy: it must end on the node (kube-proxy's
	// cluster-ips-check drops unallocated ClusterIPs), never leave it.
	out, err := suite.cluster.NodeExec(ctx, node, "nft", "list", "chain", "ip", "kube-proxy", "cluster-ips-check")
	if err != nil {
		return nil, fmt.Errorf("reading kube-proxy's cluster-ips-check on %s: %w", node, err)
	}
	if !strings.Contains(out, "ip daddr "+w.prefix.String()+" drop") {
		return nil, fmt.Errorf("kube-proxy on %s does not drop unallocated ClusterIPs of %s; not scanning:\n%s", node, w.prefix, out)
	}
	ip, err := suite.cluster.UnallocatedServiceIP(ctx)
	if err != nil {
		return nil, err
	}
	w.lateIP = ip.String()
	return w, nil
}

// hostileScanState is what the leg reads from the scanning node's agent and proxy.
type hostileScanState struct {
	status         *agentstatus.Status
	rss, heap      float64
	suppressed     float64 // MetricLogSuppressed{log=connection-refused}
	refused        float64 // MetricSvcRefused, every reason
	missing, timed int64   // the proxy's on_demand_cluster_missing and _timeout
}

func readHostileScan(ctx context.Context, agentPod, node string) (*hostileScanState, error) {
	st, err := agent.Status(ctx, suite.cluster, agentPod)
	if err != nil {
		return nil, err
	}
	m, err := agent.Metrics(ctx, suite.cluster, agentPod)
	if err != nil {
		return nil, err
	}
	stats, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return nil, err
	}
	return &hostileScanState{status: st, rss: m.Sum("process_resident_memory_bytes", nil), heap: m.Sum("go_memstats_heap_inuse_bytes", nil),
		suppressed: m.Sum(contract.MetricLogSuppressed, map[string]string{contract.LabelLog: contract.LogNameRefusal}),
		refused:    m.Sum(contract.MetricSvcRefused, nil),
		missing:    stats[proxy.TCPStat(contract.ChainSvc, proxy.OnDemandClusterMissing)],
		timed:      stats[proxy.TCPStat(contract.ChainSvc, proxy.OnDemandClusterTimeout)]}, nil
}

// scan runs one sweep in the scanning pod and counts its outcomes.
func (w *hostileScanWorkload) scan(ctx context.Context, hosts int, ports []uint16) (map[string]int, error) {
	ps := make([]string, 0, len(ports))
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(int(p)))
	}
	out, _, err := suite.cluster.Exec(ctx, w.scanner.Namespace, w.scanner.Name, workload.ClientContainer, "/svclb-echo", "sweep",
		"-prefix="+w.prefix.String(), "-hosts="+strconv.Itoa(hosts), "-ports="+strings.Join(ps, ","),
		"-parallel="+strconv.Itoa(hostileScanParallel), "-timeout="+hostileScanDialTimeout.String())
	if err != nil {
		return nil, err
	}
	rs, err := workload.ParseDial(out)
	if err != nil {
		return nil, err
	}
	by := map[string]int{}
	for _, r := range rs {
		by[echo.Outcome(r)]++
	}
	return by, nil
}

func measureHostileScan(ctx context.Context, w *hostileScanWorkload, run *evidence.Run) {
	node := w.scanner.Spec.NodeName
	fail := func(err error) { run.Error = err.Error() }
	agentPod, err := agent.PodOn(ctx, suite.cluster, node)
	if err != nil {
		fail(err)
		return
	}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		if err := suite.cluster.DeleteService(ctx, suite.legsNS, hostileScanService, time.Minute); err != nil {
			run.Notes = append(run.Notes, "cleanup: "+err.Error())
		}
		// The scan stays in the node's agent (pending full) and proxy (every name subscribed)
		// until they restart: the next run, and the legs after, start from a new pod.
		if err := restartNodePod(ctx, node, agentPod, w.scanner); err != nil && run.Error == "" {
			run.Error = "restarting the node pod after the scan: " + err.Error()
		}
	}()
	before, err := readHostileScan(ctx, agentPod, node)
	if err != nil {
		fail(err)
		return
	}

	// The pending count is read all through the scan: the bound must hold at every moment.
	scanCtx, stopWatch := context.WithCancel(ctx)
	var mu sync.Mutex
	maxPending, maxRSS := before.status.Pending, before.rss
	var watchErr error
	var watch sync.WaitGroup
	watch.Go(func() {
		for scanCtx.Err() == nil {
			s, err := readHostileScan(scanCtx, agentPod, node)
			mu.Lock()
			if err == nil {
				maxPending, maxRSS = max(maxPending, s.status.Pending), max(maxRSS, s.rss)
			} else if scanCtx.Err() == nil {
				watchErr = err
			}
			mu.Unlock()
			select {
			case <-scanCtx.Done():
			case <-time.After(time.Second):
			}
		}
	})
	t0 := time.Now()
	wide, err := w.scan(ctx, 1<<(32-w.prefix.Bits())-1, []uint16{hostileScanWidePort})
	var deep map[string]int
	if err == nil {
		deepPorts := make([]uint16, hostileScanDeepPorts)
		for i := range deepPorts {
			deepPorts[i] = uint16(hostileScanDeepFrom + i)
		}
		deep, err = w.scan(ctx, hostileScanDeepHosts, deepPorts)
	}
	scanTook := time.Since(t0)
	stopWatch()
	watch.Wait()
	if err != nil {
		fail(fmt.Errorf("scan: %w", err))
		return
	}
	after, err := readHostileScan(ctx, agentPod, node)
	if err != nil {
		fail(err)
		return
	}
	maxPending, maxRSS = max(maxPending, after.status.Pending), max(maxRSS, after.rss)

	// A Service at a scanned address, created after the scan: served, and how soon.
	svc := workload.Service(suite.legsNS, hostileScanService, workload.ServiceOptions{Selector: w.selector, Ports: []int32{hostileScanWidePort},
		Mutate: func(s *corev1.Service) { s.Spec.ClusterIP = w.lateIP }})
	created := time.Now()
	if _, err := suite.cluster.CreateService(ctx, svc, 30*time.Second); err != nil {
		fail(err)
		return
	}
	rs, err := workload.DialUntilReply(ctx, suite.cluster, w.scanner, w.lateTo(),
		workload.DialOptions{Interval: 100 * time.Millisecond, Timeout: 2 * time.Second}, hostileScanServedWithin, nil)
	if err != nil {
		fail(err)
		return
	}
	served := time.Duration(-1)
	for _, r := range rs {
		if r.OK {
			served = r.Start.Add(time.Duration(r.Millis * float64(time.Millisecond))).Sub(created)
			run.Tally([]echo.Result{r.Result}, suite.cluster.Zone)
			break
		}
	}

	// The refusal log: lines for the scanning pod per reason within the limit, the rest
	// counted and summarised.
	lines, summaries, err := scanLogLines(ctx, agentPod, w.scanner.Status.PodIP, t0, after.suppressed > before.suppressed)
	if err != nil {
		fail(err)
		return
	}
	secs := time.Since(t0).Seconds()
	allowed := contract.RefusalLogBurst + int(float64(contract.RefusalLogPerSecond)*secs)
	logOK := true
	for _, n := range lines {
		logOK = logOK && n <= allowed
	}
	refused := after.refused - before.refused
	suppressed := after.suppressed - before.suppressed
	if refused > float64(allowed*len(lines)+1) { // a flood reached the log: it must have been held back and summarised
		logOK = logOK && suppressed > 0 && summaries > 0
	}

	mu.Lock()
	defer mu.Unlock()
	if watchErr != nil {
		run.Notes = append(run.Notes, "reading the agent during the scan: "+watchErr.Error())
	}
	// A scan the agent could not be read during proves no bound.
	run.MetGreen = watchErr == nil && maxPending <= contract.OnDemandPendingMax && maxRSS < hostileScanRSS && served >= 0 && served <= hostileScanServedWithin && logOK
	// A control leg: red must hold what green holds.
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("scan of %d names in %s (wide %v, deep %v); on %s: pending max %d (cap %d), forgotten addresses %d, demanded %d; agent RSS %.0f → %.0f MiB (max %.0f), heap %.0f MiB; "+
		"proxy on_demand missing %+d, timeout %+d; %s at a scanned address replied %s after its creation; refusals %+.0f, lines by reason %v (allowed %d each), suppressed %+.0f, summaries %d",
		w.names(), scanTook.Round(time.Second), wide, deep, node, maxPending, contract.OnDemandPendingMax, after.status.Forgotten, after.status.Demanded,
		before.rss/(1<<20), after.rss/(1<<20), maxRSS/(1<<20), after.heap/(1<<20), after.missing-before.missing, after.timed-before.timed,
		w.lateTo(), servedText(served), refused, lines, allowed, suppressed, summaries)
}

func servedText(d time.Duration) string {
	if d < 0 {
		return "never (within " + hostileScanServedWithin.String() + ")"
	}
	return d.Round(time.Millisecond).String()
}

// scanLogLines counts, in the scanning node's agent log since since, the refusal lines of the
// scanning pod by reason and the summary lines of held-back ones. When wantSummary, it waits
// for a summary (written every contract.LogSummaryInterval).
func scanLogLines(ctx context.Context, agentPod, podIP string, since time.Time, wantSummary bool) (map[string]int, int, error) {
	deadline := time.Now().Add(hostileScanSummaryWithin)
	for {
		b, err := suite.cluster.ContainerLogs(ctx, contract.Namespace, agentPod, manifests.AgentContainer, since)
		if err != nil {
			return nil, 0, err
		}
		ls, err := agent.ParseRefusalLogs(b)
		if err != nil {
			return nil, 0, err
		}
		lines := map[string]int{}
		for _, l := range ls {
			if h, _, err := net.SplitHostPort(l.Source); err == nil && h == podIP {
				lines[l.Reason]++
			}
		}
		summaries := strings.Count(string(b), `"msg":"`+contract.LogSuppressed+`"`)
		if !wantSummary || summaries > 0 || time.Now().After(deadline) {
			return lines, summaries, nil
		}
		select {
		case <-ctx.Done():
			return lines, summaries, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// restartNodePod replaces the node DaemonSet's pod on node and waits until the new agent
// serves the scanner's capture listener and the proxy answers.
func restartNodePod(ctx context.Context, node, oldPod string, scanner *corev1.Pod) error {
	if err := beforeNodeRestart(ctx, node); err != nil {
		return err
	}
	if err := suite.cluster.CS.CoreV1().Pods(contract.Namespace).Delete(ctx, oldPod, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", oldPod, err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err := agent.PodOn(ctx, suite.cluster, node)
		if err != nil || pod == oldPod {
			last = fmt.Sprintf("no new %s pod on %s yet", contract.NodeDaemonSet, node)
			return false, nil
		}
		st, err := agent.Status(ctx, suite.cluster, pod)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if !slices.ContainsFunc(st.Listeners, func(l agentstatus.ListenerStatus) bool {
			return l.Pod == scanner.Name && l.Namespace == scanner.Namespace
		}) {
			last = fmt.Sprintf("agent %s has no listener for %s yet", pod, scanner.Name)
			return false, nil
		}
		if _, err := proxy.Stats(ctx, suite.cluster, node); err != nil {
			last = err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, last)
	}
	return nil
}
