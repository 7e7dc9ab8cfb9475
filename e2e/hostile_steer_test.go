package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	// hostileSteerDials is how many times the pod dials each node-local destination.
	hostileSteerDials = 3
	// hostileSteerAtOnce bounds a refusal: the proxy closes at accept, where a passthrough
	// waits for the destination (the admin and the kubelet say nothing first; metadata that
	// does not answer holds the connect for its timeout).
	hostileSteerAtOnce = time.Second
	// hostileSteerLogWithin bounds the wait for the agent's log lines: the access log flushes
	// every second.
	hostileSteerLogWithin = 30 * time.Second
	// kubeletPort is the kubelet's API on every node address.
	kubeletPort = 10250
)

// hostileSteerWorkload is a meshed pod with NET_ADMIN whose capture steers node-local
// destinations to the proxy, the destinations, an echo Service and an echo pod.
type hostileSteerWorkload struct {
	pod     corev1.Pod
	targets []string // 127.0.0.1:9901, <node InternalIP>:10250, 169.254.169.254:80
	svc     string   // the echo Service's ClusterIP:80
	echo    string   // its pod's IP:8080, outside the Service range
}

// hostile-steer: a meshed pod that holds NET_ADMIN in its netns (label mode gives its init
// container that much; an app container may have it too) can make its capture divert any TCP,
// loopback and link-local included, and the node proxy's passthrough would dial it from the
// node's netns, as the node: the proxy's admin, the kubelet, the cloud's metadata. The capture
// listener refuses node-local destinations whatever the Phase flags.
var _ = leg.Define(legs, leg.Leg[*hostileSteerWorkload]{
	Name:    "hostile-steer",
	Needs:   leg.Needs{Workers: 1},
	Control: true,
	Workloads: "meshed pod hsteer-client (app container with NET_ADMIN) on the first worker, which steers its own capture; echo Deployment hsteer " +
		"(1 pod) behind Service hsteer",
	Exercises: "internal/translate/listener.go (refusedChain, NodeLocalPrefixes: cap_refused to the blackhole cluster), agent/internal/xdsserver/nodelocal.go " +
		"(the node-local refusal log and counter), nodeproxy/proxy.go (a STATIC cluster without endpoints), fixtures/capture/steer.go",
	Setup: fmt.Sprintf("hsteer-client runs `svclb-echo steer` (an nftables route chain after the capture's that marks its TCP to 127.0.0.1:%d, to its node's InternalIP:%d "+
		"and to 169.254.169.254:80 with the capture mark), then dials each %d times; then the Service hsteer from hsteer-client and the echo pod's IP from every meshed client",
		contract.ProxyAdminPort, kubeletPort, hostileSteerDials),
	RedExpect: "same as green (control leg): node-local destinations are refused whatever the Phase flags",
	GreenMeans: fmt.Sprintf("every dial of a steered destination ends at once (closed by the proxy, in under %s); on the pod's node the proxy's tcp.%s.downstream_cx_total "+
		"and the agent's %s (counted from the proxy's access log) rise by at least every dial; the agent logs a %q refusal naming the pod and each destination; "+
		"the proxy's admin still answers, the Service and the passthrough reply",
		hostileSteerAtOnce, contract.ChainRefused, agent.NodeLocalRefusedMetric, contract.ReasonNodeLocal),
	Chance: "nothing statistical: each steered dial must be closed within " + hostileSteerAtOnce.String() + " (the proxy closes at accept; a passthrough waits), and " + allSucceed,
	Services: func(w *hostileSteerWorkload) []measure.Dialled {
		return []measure.Dialled{{To: w.echo, OutsideRange: true}}
	},
	Prepare: prepareHostileSteer,
	Measure: measureHostileSteer,
})

func prepareHostileSteer(ctx context.Context) (*hostileSteerWorkload, error) {
	workers := suite.cluster.Workers()
	if len(workers) == 0 {
		return nil, fmt.Errorf("hostile-steer needs a worker")
	}
	node := workers[0]
	p, err := workload.MeshedClient(suite.legsNS, "hsteer-client", node.Name, "hsteer")
	if err != nil {
		return nil, err
	}
	app := &p.Spec.Containers[0]
	app.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	svc, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "hsteer", workload.Backends{Replicas: 1}, workload.ServiceOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := workload.Recreate(ctx, suite.cluster, p)
	if err != nil {
		return nil, err
	}
	echoes, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=hsteer", 1, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	w := &hostileSteerWorkload{pod: pods[0], svc: workload.Addr(svc, 80),
		echo: net.JoinHostPort(echoes[0].Status.PodIP, strconv.Itoa(workload.EchoPort)),
		targets: []string{
			net.JoinHostPort("127.0.0.1", strconv.Itoa(contract.ProxyAdminPort)),
			net.JoinHostPort(node.InternalIP, strconv.Itoa(kubeletPort)),
			"169.254.169.254:80",
		}}
	out, stderr, err := suite.cluster.Exec(ctx, w.pod.Namespace, w.pod.Name, workload.ClientContainer, "/svclb-echo", "steer", "-to="+strings.Join(w.targets, ","))
	if err != nil {
		return nil, fmt.Errorf("steer in %s: %w (%s%s)", w.pod.Name, err, out, stderr)
	}
	return w, nil
}

func measureHostileSteer(ctx context.Context, w *hostileSteerWorkload, run *evidence.Run) {
	node := w.pod.Spec.NodeName
	// The refusals' witnesses real Envoy serves: the chain's downstream_cx_total (every
	// connection cap_refused takes is refused) and the agent's count of the node-local access
	// log's entries. Not cluster.blackhole.upstream_cx_none_healthy: Envoy 1.39's tcp_proxy
	// refuses without counting it (fixtures/proxy/statnames.go).
	cx := proxy.TCPStat(contract.ChainRefused, proxy.DownstreamCxTotal)
	agentPod, err := agent.PodOn(ctx, suite.cluster, node)
	if err != nil {
		run.Error = err.Error()
		return
	}
	m0, err := agent.Metrics(ctx, suite.cluster, agentPod)
	if err != nil {
		run.Error = err.Error()
		return
	}
	counted0 := m0.Sum(agent.NodeLocalRefusedMetric, nil)
	st0, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		run.Error = err.Error()
		return
	}
	since := time.Now()
	refused, dials := map[string]int{}, 0
	var slow []string
	for _, to := range w.targets {
		rs, err := workload.Dial(ctx, suite.cluster, &w.pod, to, workload.DialOptions{Count: hostileSteerDials, Interval: 100 * time.Millisecond, Timeout: workload.AttemptTimeout})
		if err != nil {
			run.Error = err.Error()
			return
		}
		for _, r := range rs {
			dials++
			closed := r.Err == echo.ErrEOF || r.Err == echo.ErrReset || r.Err == echo.ErrRefused
			if closed && time.Duration(r.Millis*float64(time.Millisecond)) < hostileSteerAtOnce {
				refused[to]++
			} else {
				slow = append(slow, fmt.Sprintf("%s: ok=%v err=%q %.0fms", to, r.OK, r.Err, r.Millis))
			}
		}
	}
	// The proxy is alive: its admin answers and it counted.
	st1, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		run.Error = "the node proxy's admin after the steered dials: " + err.Error()
		return
	}
	cxRise := st1[cx] - st0[cx]
	want := int64(len(w.targets) * hostileSteerDials)
	// Every destination is logged with the pod and every dial counted: the agent gets the
	// access log within a flush.
	pod := w.pod.Namespace + "/" + w.pod.Name
	var logged []string
	var counted float64
	_ = wait.PollUntilContextTimeout(ctx, time.Second, hostileSteerLogWithin, true, func(ctx context.Context) (bool, error) {
		m, err := agent.Metrics(ctx, suite.cluster, agentPod)
		if err != nil {
			return false, nil
		}
		counted = m.Sum(agent.NodeLocalRefusedMetric, nil) - counted0
		ls, err := agent.RefusalLogs(ctx, suite.cluster, since)
		if err != nil {
			return false, nil
		}
		logged = logged[:0]
		for _, l := range ls {
			if l.Reason == contract.ReasonNodeLocal && l.Node == node && l.Pod == pod && slices.Contains(w.targets, l.Destination) && !slices.Contains(logged, l.Destination) {
				logged = append(logged, l.Destination)
			}
		}
		return len(logged) == len(w.targets) && counted >= float64(want), nil
	})
	svcRs, err := workload.Dial(ctx, suite.cluster, &w.pod, w.svc, workload.Quick)
	if err != nil {
		run.Error = err.Error()
		return
	}
	svcOK := 0
	for _, r := range svcRs {
		if r.OK {
			svcOK++
		}
	}
	if measure.FromEveryClient(ctx, suite.cluster, suite.clients, w.echo, workload.Quick, run) == nil {
		return
	}
	allRefused := 0
	for _, n := range refused {
		allRefused += n
	}
	run.MetGreen = dials == int(want) && allRefused == dials && cxRise >= want && counted >= float64(want) && len(logged) == len(w.targets) &&
		svcOK == len(svcRs) && len(svcRs) > 0 && run.Attempts > 0 && run.Replies == run.Attempts
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("%d/%d steered dials from %s closed at once %v; on %s %s +%d, %s +%.0f; node-local log lines for %d/%d destinations; Service %s %d/%d replies; passthrough from every client: %s",
		allRefused, dials, pod, refused, node, cx, cxRise, agent.NodeLocalRefusedMetric, counted, len(logged), len(w.targets), w.svc, svcOK, len(svcRs), run.Counts())
	if len(slow) > 0 {
		run.Notes = append(run.Notes, "not refused at once: "+strings.Join(slow, "; "))
	}
}
