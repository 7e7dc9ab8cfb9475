package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	// hostileLoopDials is how many times the plain pod dials the capture port.
	hostileLoopDials = 20
	// hostileLoopWatch is how long the target node is watched after the dials: a loop makes
	// thousands of connections a second.
	hostileLoopWatch = 2 * time.Second
	// hostileLoopFDSlack bounds how much the proxy's open fds may rise meanwhile: other legs'
	// pods come and go (each a listener), a loop adds two per chained connection.
	hostileLoopFDSlack = 100
)

// hostileLoopWorkload is a pod that is not meshed on one node, the meshed client of another
// node it attacks, and an echo pod whose own address checks that node's proxy still serves.
type hostileLoopWorkload struct {
	attacker, target corev1.Pod
	echo             string // echo pod IP:port, outside the Service range
}

// hostile-loop: one dial of a meshed pod's capture port from another host, if accepted, would
// loop through the node proxy's passthrough until the proxy ran out of file descriptors,
// cutting every meshed pod on that node off from every Service. The capture resets such a dial in
// the meshed pod's netns and the listener binds loopback only, whatever the Phase flags.
var _ = leg.Define(legs, leg.Leg[*hostileLoopWorkload]{
	Name:    "hostile-loop",
	Needs:   leg.Needs{Workers: 1},
	Early:   true,
	Control: true,
	Workloads: "a plain pod (not meshed) on another node dials the first worker's meshed client at <podIP>:18001; echo Deployment hloop (1 pod, no " +
		"Service): every client dials its pod IP:8080",
	Exercises: "internal/capture/capture.go (inputRule: TCP to :18001 from outside lo is reset), internal/translate/listener.go (the listener " +
		"binds 127.0.0.1)",
	Setup: fmt.Sprintf("a pod that is not meshed dials the meshed client of another node at <podIP>:%d %d times; then every meshed client dials an echo pod's IP:8080 (outside the Service range, through the proxy's passthrough)",
		contract.CapturePort, hostileLoopDials),
	RedExpect: "same as green (control leg): the capture port is closed to other hosts whatever the Phase flags",
	GreenMeans: fmt.Sprintf("every dial of <podIP>:%d is refused at once; in the %s after them the target node's cluster.%s.upstream_cx_total rises by at most 1 and its proxy's open fds by less than %d; every meshed client's passthrough attempt replies",
		contract.CapturePort, hostileLoopWatch, contract.PassthroughCluster, hostileLoopFDSlack),
	Chance: "nothing statistical: each dial of the capture port must be refused (a reset, within " + workload.AttemptTimeout.String() + "), and " + allSucceed,
	Services: func(w *hostileLoopWorkload) []measure.Dialled {
		return []measure.Dialled{{To: w.echo, OutsideRange: true}}
	},
	Prepare: func(ctx context.Context) (*hostileLoopWorkload, error) {
		workers := suite.cluster.Workers()
		if len(suite.clients) < 2 || len(workers) == 0 {
			return nil, fmt.Errorf("hostile-loop needs two nodes with a meshed client, one of them a worker (have %d clients, %d workers)", len(suite.clients), len(workers))
		}
		target := suite.clientOn(workers[0].Name)
		if target == nil {
			return nil, fmt.Errorf("no meshed client on %s", workers[0].Name)
		}
		var from string
		for _, c := range suite.clients {
			if c.Spec.NodeName != target.Spec.NodeName {
				from = c.Spec.NodeName
				break
			}
		}
		dep := workload.EchoDeployment(suite.legsNS, "hloop", workload.Backends{Replicas: 1})
		if err := suite.cluster.Create(ctx, dep, workload.PlainClient(suite.legsNS, "hloop-attacker", from, "hloop-attacker")); err != nil {
			return nil, err
		}
		echoes, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=hloop", 1, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		attackers, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.RoleLabel+"=hloop-attacker", 1, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		return &hostileLoopWorkload{attacker: attackers[0], target: *target,
			echo: net.JoinHostPort(echoes[0].Status.PodIP, strconv.Itoa(workload.EchoPort))}, nil
	},
	Measure: measureHostileLoop,
})

func measureHostileLoop(ctx context.Context, w *hostileLoopWorkload, run *evidence.Run) {
	node := w.target.Spec.NodeName
	upstream := proxy.ClusterStat(contract.PassthroughCluster, proxy.UpstreamCxTotal)
	read := func() (map[string]int64, proxy.Load, error) {
		st, err := proxy.Stats(ctx, suite.cluster, node)
		if err != nil {
			return nil, proxy.Load{}, err
		}
		l, err := proxy.ReadLoad(ctx, suite.cluster, node)
		return st, l, err
	}
	st0, l0, err := read()
	if err != nil {
		run.Error = err.Error()
		return
	}
	to := net.JoinHostPort(w.target.Status.PodIP, strconv.Itoa(contract.CapturePort))
	rs, err := workload.Dial(ctx, suite.cluster, &w.attacker, to, workload.DialOptions{Count: hostileLoopDials, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout})
	if err != nil {
		run.Error = err.Error()
		return
	}
	refused := 0
	for _, r := range rs {
		if r.Err == echo.ErrRefused {
			refused++
		}
	}
	select {
	case <-time.After(hostileLoopWatch):
	case <-ctx.Done():
		run.Error = ctx.Err().Error()
		return
	}
	st1, l1, err := read()
	if err != nil {
		run.Error = err.Error()
		return
	}
	passed := st1[upstream] - st0[upstream]
	fds, conntrack := l1.FDs-l0.FDs, l1.Conntrack-l0.Conntrack

	if measure.FromEveryClient(ctx, suite.cluster, suite.clients, w.echo, workload.Quick, run) == nil {
		return
	}
	run.MetGreen = refused == len(rs) && len(rs) == hostileLoopDials && passed <= 1 && fds < hostileLoopFDSlack &&
		run.Attempts > 0 && run.Replies == run.Attempts
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("%d/%d dials of %s (%s's meshed client) from %s refused; on %s in %s: %s +%d, proxy fds %+d, conntrack %+d; passthrough from every client: %s",
		refused, len(rs), to, node, w.attacker.Spec.NodeName, node, hostileLoopWatch, upstream, passed, fds, conntrack, run.Counts())
}
