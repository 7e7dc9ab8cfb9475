package e2e

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// affinityClients is the number of meshed client pods on one node, and
// affinityBackends the echo backends behind the Service.
//
// What can and cannot flake. Each pod sticking to one backend is
// deterministic in both runs (a fixed hash key and a fixed backend set). Red
// putting every pod on one backend is deterministic too: kube-proxy's affinity
// key is the node's address, the same for every pod. Green spreading the pods
// is chance: the proxy hashes each pod's own address onto a ring where every
// backend owns about a third (RING_HASH, min_ring_size 1024: shares within a
// few percent of 1/3), so all N pods land on one backend with probability
// about 3·(1/3)^N. With 6 pods that was 1/243 per run; with 10 it is
// 1/19683 (and at most ~1/16000 with shares skewed to 0.36/0.33/0.31). The pod
// addresses and the backends are fixed for the leg, so a re-run with new pods
// draws again; the remaining chance is of a false failure, never of a false
// pass.
const (
	affinityClients  = 10
	affinityBackends = 3
)

type affinityWorkload struct {
	svc     *corev1.Service
	to      string
	clients []corev1.Pod
}

// affinity: ClientIP affinity must be per pod. Under kube-proxy (the red run:
// the proxy's passthrough connects from the node's address) every pod of a
// node shares one source address, so all of them land on one backend.
var _ = leg.Define(legs, leg.Leg[*affinityWorkload]{
	Name:      "affinity",
	Needs:     leg.Needs{Workers: 1},
	Early:     true,
	Workloads: "Service aff (sessionAffinity ClientIP, 3 echo backends, not cut); 10 meshed clients on the first worker",
	Exercises: "internal/translate/cluster.go (RING_HASH), internal/translate/listener.go (tcp_proxy hash_policy source_ip), " +
		"nodeproxy/internal/lb/balancer.go",
	Setup: fmt.Sprintf("sessionAffinity ClientIP, %d echo backends, %d meshed client pods on one worker; kube-proxy objects left in place "+
		"(red shows kube-proxy's affinity through the passthrough)", affinityBackends, affinityClients),
	RedExpect:  "each pod sticks, but every pod of the node lands on the same backend (kube-proxy sees only the node's address)",
	GreenMeans: "each pod sticks to one backend, and the pods are not all on one backend",
	Timeout:    6 * time.Minute,
	Chance: fmt.Sprintf("green's spread is chance: all %d pods hash onto one backend's third of the ring with probability about 3·(1/3)^%d = 1/19683 "+
		"(at most ~1/16000 with shares skewed to 0.36/0.33/0.31), a false failure, never a false pass; stickiness and red's single backend are deterministic. "+
		"Every attempt must succeed within %s (workload.AttemptTimeout), 3 pods dialling at a time", affinityClients, affinityClients, workload.AttemptTimeout),
	Services: func(aw *affinityWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(aw.svc, 80)}
	},
	Prepare: func(ctx context.Context) (*affinityWorkload, error) {
		ns, node := suite.legsNS, suite.cluster.Workers()[0].Name
		dep := workload.EchoDeployment(ns, "aff", workload.Backends{Replicas: affinityBackends})
		svc := workload.Service(ns, "aff", workload.ServiceOptions{Selector: dep.Spec.Selector.MatchLabels, Mutate: func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}})
		objs := []client.Object{dep, svc}
		for i := range affinityClients {
			p, err := workload.MeshedClient(ns, fmt.Sprintf("aff-client-%d", i), node, "aff-client")
			if err != nil {
				return nil, err
			}
			objs = append(objs, p)
		}
		if err := suite.cluster.Create(ctx, objs...); err != nil {
			return nil, err
		}
		if _, err := suite.cluster.WaitPodsReady(ctx, ns, workload.AppLabel+"=aff", affinityBackends, 2*time.Minute); err != nil {
			return nil, err
		}
		clients, err := suite.cluster.WaitPodsReady(ctx, ns, workload.RoleLabel+"=aff-client", affinityClients, 3*time.Minute)
		if err != nil {
			return nil, err
		}
		return &affinityWorkload{svc: svc, to: workload.Addr(svc, 80), clients: clients}, nil
	},
	Measure: func(ctx context.Context, aw *affinityWorkload, run *evidence.Run) {
		// A few pods dial at a time: ten sequential execs cost ten exec
		// round trips, ten at once starve a loaded 2-core machine (a full
		// suite run saw 2 s attempts time out). The timeout is generous for
		// the same reason: this leg is about where replies come from, not
		// how fast.
		jobs := make([]workload.DialJob, len(aw.clients))
		for i := range aw.clients {
			jobs[i] = workload.DialJob{Client: &aw.clients[i], To: aw.to, Opts: workload.DialOptions{Count: 8, Interval: 50 * time.Millisecond, Timeout: workload.AttemptTimeout}}
		}
		rss, err := workload.DialAll(ctx, suite.cluster, jobs, 3)
		if err != nil {
			run.Error = err.Error()
			return
		}
		sticky := 0
		perPod := map[string]string{}
		for i, rs := range rss {
			run.Tally(rs, suite.cluster.Zone)
			seen := map[string]bool{}
			for _, r := range rs {
				if r.Reply != nil {
					seen[r.Reply.Pod] = true
				}
			}
			if len(seen) == 1 {
				sticky++
				for b := range seen {
					perPod[aw.clients[i].Name] = b
				}
			}
		}
		distinct := map[string]bool{}
		for _, b := range perPod {
			distinct[b] = true
		}
		all := run.Attempts > 0 && run.Replies == run.Attempts
		run.MetGreen = all && sticky == len(aw.clients) && len(distinct) > 1
		run.MetRed = all && sticky == len(aw.clients) && len(distinct) == 1
		run.Summary = fmt.Sprintf("%s; %d/%d pods stuck to one backend; pods spread over %d backend(s)", run.Counts(), sticky, len(aw.clients), len(distinct))
		run.Notes = append(run.Notes, fmt.Sprintf("pod→backend %v", perPod))
	},
})
