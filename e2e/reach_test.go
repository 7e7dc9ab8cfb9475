package e2e

import (
	"context"
	"net"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

type reachWorkload struct {
	svc *corev1.Service
	to  string
}

var _ = defineLeg(leg{
	name:       "reach",
	setup:      "non-mesh ClusterIP Service (2 echo backends), kube-proxy objects deleted on every node; a meshed client on every node",
	redExpect:  "no backend reply: passthrough to the VIP hits kube-proxy's REJECT, the proxy closes the client's connection",
	greenMeans: "every attempt from every meshed client gets a backend's reply",
	prepare: func(ctx context.Context) (any, error) {
		svc, err := deployEcho(ctx, "reach", backendOpts{replicas: 2}, svcOpts{guarded: true})
		if err != nil {
			return nil, err
		}
		return &reachWorkload{svc: svc, to: net.JoinHostPort(svc.Spec.ClusterIP, "80")}, nil
	},
	measure: func(ctx context.Context, w any, run *evidence.Run) {
		rw := w.(*reachWorkload)
		peers := dialFromEveryClient(ctx, run, rw.to, quick)
		if run.Error != "" {
			return
		}
		run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts
		run.MetRed = run.Attempts > 0 && run.Replies == 0 && run.ProxyClosed == run.Attempts
		run.Summary = countsSummary(run)
		if len(peers) > 0 {
			run.Notes = append(run.Notes, "peers the backends saw: "+peers)
		}
	},
})

// dialFromEveryClient dials to from the meshed client of every node and
// tallies into run; it returns the distinct peer addresses the backends saw.
func dialFromEveryClient(ctx context.Context, run *evidence.Run, to string, o dialOpts) string {
	seen := map[string]bool{}
	for _, c := range suite.clients {
		rs, err := dial(ctx, &c, to, o)
		if err != nil {
			run.Error = err.Error()
			return ""
		}
		tally(run, rs)
		for _, r := range rs {
			if r.Reply != nil {
				host, _, _ := net.SplitHostPort(r.Reply.Peer)
				seen[host+" (client on "+c.Spec.NodeName+")"] = true
			}
		}
	}
	if len(seen) == 0 {
		return ""
	}
	var ps []string
	for p := range seen {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return strings.Join(ps, ", ")
}
