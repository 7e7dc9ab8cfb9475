package e2e

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

const affinityClients = 6

type affinityWorkload struct {
	to      string
	clients []corev1.Pod
}

// affinity: ClientIP affinity must be per pod. Under kube-proxy (the red run:
// the proxy's passthrough connects from the node's address) every pod of a
// node shares one source address, so all of them land on one backend.
var _ = defineLeg(leg{
	name: "affinity",
	setup: fmt.Sprintf("sessionAffinity ClientIP, 3 echo backends, %d meshed client pods on one worker; kube-proxy objects left in place "+
		"(red shows kube-proxy's affinity through the passthrough)", affinityClients),
	redExpect:  "each pod sticks, but every pod of the node lands on the same backend (kube-proxy sees only the node's address)",
	greenMeans: "each pod sticks to one backend, and the pods are not all on one backend",
	timeout:    6 * time.Minute,
	prepare: func(ctx context.Context) (any, error) {
		node := workers()[0].Name
		dep := echoDeployment("aff", backendOpts{replicas: 3})
		svc := legService("aff", svcOpts{selector: dep.Spec.Selector.MatchLabels, mutate: func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}})
		objs := []any{dep, svc}
		for i := 0; i < affinityClients; i++ {
			p := meshedClient(fmt.Sprintf("aff-client-%d", i), node)
			p.Labels["role"] = "aff-client"
			objs = append(objs, p)
		}
		if err := create(ctx, objs...); err != nil {
			return nil, err
		}
		if _, err := waitPodsReady(ctx, "app=aff", 3, 2*time.Minute); err != nil {
			return nil, err
		}
		clients, err := waitPodsReady(ctx, "role=aff-client", affinityClients, 3*time.Minute)
		if err != nil {
			return nil, err
		}
		return &affinityWorkload{to: net.JoinHostPort(svc.Spec.ClusterIP, "80"), clients: clients}, nil
	},
	measure: func(ctx context.Context, w any, run *evidence.Run) {
		aw := w.(*affinityWorkload)
		sticky := 0
		perPod := map[string]string{}
		for _, c := range aw.clients {
			rs, err := dial(ctx, &c, aw.to, dialOpts{count: 8, interval: 50 * time.Millisecond, timeout: 2 * time.Second})
			if err != nil {
				run.Error = err.Error()
				return
			}
			tally(run, rs)
			seen := map[string]bool{}
			for _, r := range rs {
				if r.Reply != nil {
					seen[r.Reply.Pod] = true
				}
			}
			if len(seen) == 1 && run.Replies > 0 {
				sticky++
				for b := range seen {
					perPod[c.Name] = b
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
		run.Summary = fmt.Sprintf("%s; %d/%d pods stuck to one backend; pods spread over %d backend(s)", countsSummary(run), sticky, len(aw.clients), len(distinct))
		run.Notes = append(run.Notes, fmt.Sprintf("pod→backend %v", perPod))
	},
})
