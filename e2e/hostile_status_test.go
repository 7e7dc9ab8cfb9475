package e2e

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// hostileStatusPorts are the node-side HTTP ports a pod must not reach: the agent's, the
// guard's and the node proxy's admin.
var hostileStatusPorts = []int{contract.AgentPort, contract.GuardPort, contract.ProxyAdminPort}

// hostile-status: the agent and the guard run on hostNetwork, where every address but loopback
// is the node's and every pod reaches it. Their /status names the node's meshed pods, netns
// paths and the Services cut; their HTTP listens on 127.0.0.1 only, and the suite reads it with
// the binaries' own get command in their containers (pods/exec). Before, both listened on the
// node's InternalIP and any pod read them.
var _ = leg.Define(legs, leg.Leg[*corev1.Pod]{
	Name:      "hostile-status",
	Needs:     leg.Needs{Workers: 1},
	Control:   true,
	Workloads: "a plain pod (not meshed) on the first worker",
	Exercises: "fixtures/manifests/node.go and fixtures/guard/guard.go (--http and --listen on 127.0.0.1), internal/loopget (the get command the suite reads through)",
	Setup: fmt.Sprintf("the plain pod dials every node's InternalIP at the agent's :%d, the guard's :%d and the proxy admin's :%d; the suite reads every agent's and guard's /status with kubectl exec",
		contract.AgentPort, contract.GuardPort, contract.ProxyAdminPort),
	RedExpect:  "same as green (control leg): where the daemons listen does not depend on the Phase flags",
	GreenMeans: "every dial is refused (the node answers with a reset: nothing listens there); every agent's and every guard's /status is read through its container",
	Chance:     "nothing statistical: each dial must be refused within " + workload.AttemptTimeout.String(),
	Prepare: func(ctx context.Context) (*corev1.Pod, error) {
		workers := suite.cluster.Workers()
		if len(workers) == 0 {
			return nil, fmt.Errorf("hostile-status needs a worker node")
		}
		if err := suite.cluster.Create(ctx, workload.PlainClient(suite.legsNS, "hstatus", workers[0].Name, "hstatus")); err != nil {
			return nil, err
		}
		pods, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.RoleLabel+"=hstatus", 1, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		return &pods[0], nil
	},
	Measure: measureHostileStatus,
})

func measureHostileStatus(ctx context.Context, from *corev1.Pod, run *evidence.Run) {
	var open []string
	dials, refused := 0, 0
	for _, n := range suite.cluster.Nodes {
		for _, port := range hostileStatusPorts {
			to := net.JoinHostPort(n.InternalIP, strconv.Itoa(port))
			rs, err := workload.Dial(ctx, suite.cluster, from, to, workload.DialOptions{Count: 2, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout})
			if err != nil {
				run.Error = err.Error()
				return
			}
			for _, r := range rs {
				dials++
				if r.Err == echo.ErrRefused {
					refused++
				} else {
					open = append(open, fmt.Sprintf("%s (%s): %s", to, n.Name, echo.Outcome(r)))
				}
			}
		}
	}
	agents, err := agent.Statuses(ctx, suite.cluster)
	if err != nil {
		run.Error = "read the agents' /status through their containers: " + err.Error()
		return
	}
	guards, err := guard.Statuses(ctx, suite.cluster)
	if err != nil {
		run.Error = "read the guards' /status through their containers: " + err.Error()
		return
	}
	sort.Strings(open)
	n := len(suite.cluster.Nodes)
	run.MetGreen = dials == n*len(hostileStatusPorts)*2 && refused == dials && len(agents) == n && len(guards) == n
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("%d/%d dials from %s of %d nodes' :%d, :%d, :%d refused; /status read through the containers of %d agents and %d guards",
		refused, dials, from.Spec.NodeName, n, contract.AgentPort, contract.GuardPort, contract.ProxyAdminPort, len(agents), len(guards))
	if len(open) > 0 {
		run.Notes = append(run.Notes, "reached: "+strings.Join(open, "; "))
	}
}
