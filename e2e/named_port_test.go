package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The named-port leg's backends: each declares port name namedPortName on
// its own number, and nothing declares namedPortAbsent.
const (
	namedPortName    = "web"
	namedPortAbsent  = "nowhere"
	namedPortRefusal = 5 // attempts per client on port 81, all at once
)

// namedPortBackends are the two pods and the port each listens on.
var namedPortBackends = map[string]int32{"np-a": workload.EchoPort, "np-b": workload.EchoPort + 1010}

type namedPortWorkload struct {
	svc *corev1.Service
	// endpoints are the pod IP:port port 80 must resolve to, one per backend.
	endpoints []netip.AddrPort
}

// named-port: a named targetPort resolves per endpoint, from the
// EndpointSlice's port of that name; a name no pod declares leaves the
// Service port without endpoints, refused no-endpoints.
var _ = leg.Define(legs, leg.Leg[*namedPortWorkload]{
	Name:      "named-port",
	Early:     true,
	Workloads: "Service np (cut): port 80 → targetPort web, declared as 8080 by np-a and 9090 by np-b; port 81 → a name no pod declares",
	Exercises: "internal/translate/endpoints.go (SelectEndpoints: the slice's port of the Service port's name), internal/translate/cluster.go (one " +
		"cluster per Service port); the refusal path of refuse-no-endpoints",
	Setup: fmt.Sprintf("ClusterIP Service np (kube-proxy ClusterIP entries deleted) with port 80 → targetPort %q and port 81 → targetPort %q; "+
		"pod np-a declares %q as %d and listens only there, pod np-b declares it as %d and listens only there; no pod declares %q",
		namedPortName, namedPortAbsent, namedPortName, namedPortBackends["np-a"], namedPortBackends["np-b"], namedPortAbsent),
	RedExpect: measure.RedExpect,
	GreenMeans: fmt.Sprintf("every proxy assigns np:80 exactly np-a's IP:%d and np-b's IP:%d and np:81 no endpoint; every attempt on port 80 replies, from both pods; "+
		"every attempt on port 81 is refused by the proxy and %s{reason=%q} rises by exactly those attempts",
		namedPortBackends["np-a"], namedPortBackends["np-b"], agent.RefusedMetric, agent.ReasonNoEndpoints),
	Chance: allSucceed + "; both pods replying: round robin over 2 hosts, 10 attempts per client",
	Prepare: func(ctx context.Context) (*namedPortWorkload, error) {
		ns := suite.legsNS
		var objs []*corev1.Pod
		for _, name := range slices.Sorted(maps.Keys(namedPortBackends)) {
			objs = append(objs, workload.EchoPod(ns, name, "np", workload.EchoPodOptions{Port: namedPortBackends[name], PortName: namedPortName}))
		}
		svc := workload.Service(ns, "np", workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: "np"}, Ports: []int32{80, 81}, Cut: true,
			Mutate: func(s *corev1.Service) {
				s.Spec.Ports[0].TargetPort = intstr.FromString(namedPortName)
				s.Spec.Ports[1].TargetPort = intstr.FromString(namedPortAbsent)
			}})
		if err := suite.cluster.Create(ctx, objs[0], objs[1], svc); err != nil {
			return nil, err
		}
		pods, err := suite.cluster.WaitPodsReady(ctx, ns, workload.AppLabel+"=np", len(objs), 2*time.Minute)
		if err != nil {
			return nil, err
		}
		w := &namedPortWorkload{svc: svc}
		want := map[string]string{}
		for _, p := range pods {
			want[p.Name] = workload.EndpointReady
			ap, err := netip.ParseAddrPort(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(namedPortBackends[p.Name]))))
			if err != nil {
				return nil, fmt.Errorf("pod %s: %w", p.Name, err)
			}
			w.endpoints = append(w.endpoints, ap)
		}
		slices.SortFunc(w.endpoints, netip.AddrPort.Compare)
		if err := workload.WaitEndpoints(ctx, suite.cluster, ns, svc.Name, want); err != nil {
			return nil, err
		}
		if _, err := guard.WaitCut(ctx, suite.cluster, svc, time.Minute); err != nil {
			return nil, err
		}
		return w, nil
	},
	Services: func(w *namedPortWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(w.svc, 80), measure.ServicePort(w.svc, 81).Refused(agent.ReasonNoEndpoints)}
	},
	Measure: func(ctx context.Context, w *namedPortWorkload, run *evidence.Run) {
		if err := measureNamedPort(ctx, w, run); err != nil {
			run.Error = err.Error()
		}
	},
})

func measureNamedPort(ctx context.Context, w *namedPortWorkload, run *evidence.Run) error {
	clients := suite.clients
	web, absent := workload.Addr(w.svc, 80), workload.Addr(w.svc, 81)
	webCluster, absentCluster := contract.ClusterPrefix+web, contract.ClusterPrefix+absent
	// What each proxy assigned to the two ports: the run's programmed wait
	// compared them with internal/translate; this compares them with the
	// pods' declared ports.
	assigned, held := true, false
	for _, n := range clientNodes(clients) {
		eps, err := proxy.Endpoints(ctx, suite.cluster, n)
		if err != nil {
			return err
		}
		gotWeb, heldWeb := eps[webCluster]
		gotAbsent, heldAbsent := eps[absentCluster]
		held = held || heldWeb || heldAbsent
		assigned = assigned && slices.Equal(gotWeb, w.endpoints) && len(gotAbsent) == 0
		run.Notes = append(run.Notes, fmt.Sprintf("%s assigns %s: %s; %s: %s", n, webCluster, assignment(gotWeb, heldWeb), absentCluster, assignment(gotAbsent, heldAbsent)))
	}
	var jobs []workload.DialJob
	for i := range clients {
		jobs = append(jobs, workload.DialJob{Client: &clients[i], To: web, Opts: workload.Quick})
		for range namedPortRefusal {
			jobs = append(jobs, workload.DialJob{Client: &clients[i], To: absent, Opts: workload.DialOptions{Count: 1, Timeout: workload.AttemptTimeout}})
		}
	}
	rss, err := workload.DialAll(ctx, suite.cluster, jobs, len(jobs))
	if err != nil {
		return err
	}
	pods := map[string]bool{}
	refused := 0
	for _, rs := range rss {
		run.Tally(rs, suite.cluster.Zone)
		for _, r := range rs {
			if r.Reply != nil {
				pods[r.Reply.Pod] = true
			}
			if r.To == absent && echo.Outcome(r) == echo.OutcomeProxyClosed {
				refused++
			}
		}
	}
	var webF, absentF evidence.Flow
	for _, n := range clientNodes(clients) {
		f, g := run.FromNode(n, web), run.FromNode(n, absent)
		webF.Attempts, webF.Replies = webF.Attempts+f.Attempts, webF.Replies+f.Replies
		absentF.Attempts, absentF.Replies = absentF.Attempts+g.Attempts, absentF.Replies+g.Replies
	}
	reached := webF.Attempts > 0 && webF.Replies == webF.Attempts && len(pods) == len(namedPortBackends)
	run.MetGreen = assigned && reached && absentF.Attempts > 0 && refused == absentF.Attempts
	run.MetRed = !held && run.Attempts > 0 && run.Replies == 0
	run.Summary = fmt.Sprintf("port 80: %d/%d replies, from %v; port 81: %d/%d refused by the proxy; proxies assign as declared: %v",
		webF.Replies, webF.Attempts, slices.Sorted(maps.Keys(pods)), refused, absentF.Attempts, assigned)
	return nil
}

// assignment spells a cluster's endpoints, or their absence.
func assignment(eps []netip.AddrPort, held bool) string {
	if !held {
		return "no assignment"
	}
	if len(eps) == 0 {
		return "no endpoint"
	}
	return fmt.Sprint(eps)
}
