package kubeproxyguard

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// restoreCuts puts back, as kube-proxy wrote them, the cut elements no
// guard should keep cut, in transactions of at most maxOps messages:
//
//   - of a chosen Service, those of ports the meshed path leaves to
//     kube-proxy (objects.Stale, cut by a guard that cut every protocol and
//     port): its UDP, SCTP and DNS ports work for everyone again once this
//     guard replaces that one, whatever the chosen set is the truth of;
//   - in a proxy cut, of a chosen Service, also those an all cut left
//     (objects.Cut), once the guard's set refuses them to the node proxy
//     (syncProxyCut ran first and did not fail);
//   - of every Service not chosen, all of them (label removed, namespace no
//     longer selected, or chosen before the guard restarted). Only a guard
//     whose chosen set is the node's whole truth does this
//     (Options.RestoreUnchosen), and only once that set is known
//     (SetServices was called): before, every Service would look unchosen.
//
// kube-proxy would not: its partial syncs compare with its own record,
// which still holds its verdict, and full syncs are rare.
func (g *Guard) restoreCuts(p *pass) {
	put := map[types.NamespacedName][]element{}
	var svcs []types.NamespacedName
	for _, s := range p.tb.cutServices() {
		o := p.tb.services[s]
		switch {
		case p.want[s] && g.proxyMode() && p.proxyErr == nil && len(o.Cut)+len(o.Stale) > 0:
			put[s] = slices.Concat(o.Cut, o.Stale)
		case p.want[s] && len(o.Stale) > 0:
			put[s] = o.Stale
		case !p.want[s] && p.authoritative:
			put[s] = slices.Concat(o.Cut, o.Stale)
		default:
			continue
		}
		svcs = append(svcs, s)
	}
	for _, group := range chunk(svcs, func(s types.NamespacedName) int { return 2 * len(put[s]) }) {
		if err := g.restore(group, put); err != nil {
			// A race with kube-proxy (it deleted or rewrote the key) or a
			// verdict whose chain is gone: the next pass reads again; at
			// worst kube-proxy's next full sync puts the element back.
			g.metrics.errors.WithLabelValues("restore").Inc()
			p.restoreErr = err
			for _, s := range group {
				if p.want[s] {
					p.restoreErrs[s] = err
				}
			}
			g.log.Warn("restoring kube-proxy's ClusterIP entries failed; retrying", "services", group, "err", err)
			continue
		}
		for _, s := range group {
			switch {
			case p.want[s] && g.proxyMode():
				g.log.Info("restored kube-proxy's ClusterIP entries: the proxy cut refuses only the node proxy's connections", "service", s, "ports", portNames(put[s]))
			case p.want[s]:
				g.log.Info("restored kube-proxy's ClusterIP entries of ports the meshed path leaves to kube-proxy", "service", s, "ports", portNames(put[s]))
			default:
				g.log.Info("restored kube-proxy's ClusterIP entries of a Service no longer guarded", "service", s, "elements", len(put[s]))
			}
		}
	}
}

// restore writes back kube-proxy's verdict and comment of the cut elements
// put holds for svcs, in one transaction (delete and add, as the cut).
func (g *Guard) restore(svcs []types.NamespacedName, put map[types.NamespacedName][]element) error {
	n := 0
	for _, svc := range svcs {
		for _, e := range put[svc] {
			if err := g.overwrite(e, e.Verdict.nftVerdict(), e.Comment); err != nil {
				return err
			}
			n++
		}
	}
	if err := g.conn.Flush(); err != nil {
		return fmt.Errorf("restore %d Service(s) (%d elements): %w", len(svcs), n, err)
	}
	return nil
}
