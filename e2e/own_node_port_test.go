package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// ownNodePortWorkload is a NodePort Service and the address of its port on every node.
type ownNodePortWorkload struct {
	svc *corev1.Service
	// at is <node InternalIP>:<nodePort>, by node name.
	at map[string]string
}

// own-node-port: NodePorts stay kube-proxy's (the proposal keeps them there), and a meshed pod
// reaches them on every node, its own included. Its capture leaves TCP to its own node's
// addresses alone (internal/capture, the set node_addrs), so that TCP leaves the pod from the
// pod's address as an unmeshed pod's does; captured, it would meet the listener's cap_refused
// (the passthrough would dial it as the node). Other nodes' addresses are captured and passed
// through. The Service is cut: the guard takes only its ClusterIP entries, never its NodePort.
var _ = leg.Define(legs, leg.Leg[*ownNodePortWorkload]{
	Name:    "own-node-port",
	Control: true,
	Workloads: "echo Deployment ownnp (1 pod) behind NodePort Service ownnp (cut: its ClusterIP entries are gone, its NodePort path is kube-proxy's); " +
		"the meshed client on every node dials <InternalIP>:<nodePort> of every node, its own included",
	Exercises: "internal/capture/capture.go (outputRules: the node's addresses, set node_addrs, returned unmarked), cmd/svclb-capture (-node-addrs from " +
		"status.hostIPs, fixtures/manifests/mesh.go), pkg/kubeproxyguard (the NodePort path kept)",
	Setup: "a NodePort Service ownnp with one echo backend, labelled cut; the meshed client on every node dials each node's InternalIP:nodePort, " +
		"its own node's and the others'",
	RedExpect: "same as green (control leg): NodePorts are kube-proxy's whatever the Phase flags",
	GreenMeans: fmt.Sprintf("every attempt from every meshed client to every node's InternalIP:nodePort, its own node's included, gets the backend's reply; "+
		"on no client node does tcp.%s.downstream_cx_total rise (nothing went to the listener as node-local); the ClusterIP stays cut throughout",
		contract.ChainRefused),
	Chance: allSucceed,
	// Declared for the evidence's cut check (kube-proxy holds no ClusterIP entry of it during
	// either run); never dialled: the attempts go to the node addresses.
	Services: func(w *ownNodePortWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(w.svc, 80)}
	},
	Prepare: prepareOwnNodePort,
	Measure: measureOwnNodePort,
})

func prepareOwnNodePort(ctx context.Context) (*ownNodePortWorkload, error) {
	since := time.Now()
	svc, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "ownnp", workload.Backends{Replicas: 1},
		workload.ServiceOptions{Cut: true, Mutate: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }})
	if err != nil {
		return nil, err
	}
	// Create leaves an existing Service (a kept cluster) unread: read the NodePort allocated.
	if svc, err = suite.cluster.CS.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("get Service %s/ownnp: %w", suite.legsNS, err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].NodePort == 0 {
		return nil, fmt.Errorf("service %s/%s: no NodePort allocated: %+v", svc.Namespace, svc.Name, svc.Spec.Ports)
	}
	// Every kube-proxy has programmed the NodePort (a sync after the Service's creation), and
	// the guard has cut the ClusterIP since.
	if _, err := guard.WaitKubeProxySynced(ctx, suite.cluster, svc, since, 2*time.Minute); err != nil {
		return nil, err
	}
	w := &ownNodePortWorkload{svc: svc, at: map[string]string{}}
	port := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for _, n := range suite.cluster.Nodes {
		if n.InternalIP == "" {
			return nil, fmt.Errorf("node %s has no InternalIP", n.Name)
		}
		w.at[n.Name] = net.JoinHostPort(n.InternalIP, port)
	}
	return w, nil
}

func measureOwnNodePort(ctx context.Context, w *ownNodePortWorkload, run *evidence.Run) {
	clients := suite.clients
	nodes := clientNodes(clients)
	refused := proxy.TCPStat(contract.ChainRefused, proxy.DownstreamCxTotal)
	passed := proxy.TCPStat(contract.ChainPassthrough, proxy.DownstreamCxTotal)
	before, err := nodeStats(ctx, nodes)
	if err != nil {
		run.Error = err.Error()
		return
	}
	var jobs []workload.DialJob
	for i := range clients {
		for _, n := range suite.cluster.Nodes {
			jobs = append(jobs, workload.DialJob{Client: &clients[i], To: w.at[n.Name], Opts: workload.Quick})
		}
	}
	results, err := workload.DialAll(ctx, suite.cluster, jobs, len(jobs))
	if err != nil {
		run.Error = err.Error()
		return
	}
	type tally struct{ replies, attempts int }
	var own, other tally
	var bad []string
	for i, rs := range results {
		run.Tally(rs, suite.cluster.Zone)
		j := jobs[i]
		t := &other
		if j.To == w.at[j.Client.Spec.NodeName] {
			t = &own
		}
		for _, r := range rs {
			t.attempts++
			if echo.Outcome(r) == echo.OutcomeReply {
				t.replies++
			} else if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%s → %s: %s %s", j.Client.Spec.NodeName, j.To, echo.Outcome(r), r.Err))
			}
		}
	}
	after, err := nodeStats(ctx, nodes)
	if err != nil {
		run.Error = err.Error()
		return
	}
	run.Counters = map[string]float64{}
	refusals := int64(0)
	for _, n := range nodes {
		d := statDelta(before, after, n, refused)
		refusals += d
		run.Counters[refused+" on "+n] = float64(d)
		run.Counters[passed+" on "+n] = float64(statDelta(before, after, n, passed))
	}
	run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts && own.attempts > 0 && refusals == 0
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("%s; to the client's own node %d/%d replies, to the other nodes %d/%d; %s +%d on the clients' nodes (NodePort %d)",
		run.Counts(), own.replies, own.attempts, other.replies, other.attempts, refused, refusals, w.svc.Spec.Ports[0].NodePort)
	run.Notes = append(run.Notes, deltaNote(before, after, nodes, refused, passed))
	if len(bad) > 0 {
		run.Notes = append(run.Notes, "failed attempts (first 3): "+strings.Join(bad, "; "))
	}
}
