package kubeproxyguard

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// restoreUnchosen puts back the cut elements of every Service the guard no
// longer guards (label removed, namespace no longer selected, or chosen
// before the guard restarted), in transactions of at most maxOps messages.
// kube-proxy would not: its partial syncs compare with its own record,
// which still holds its verdict, and full syncs are rare. Only a guard
// whose chosen set is the node's whole truth does this
// (Options.RestoreUnchosen), and only once that set is known (SetServices
// was called): before, every Service would look unchosen.
func (g *Guard) restoreUnchosen(p *pass) {
	if !p.authoritative {
		return
	}
	var svcs []types.NamespacedName
	for _, s := range p.tb.cutServices() {
		if !p.want[s] {
			svcs = append(svcs, s)
		}
	}
	for _, group := range chunk(svcs, func(s types.NamespacedName) int { return 2 * len(p.tb.services[s].Cut) }) {
		if err := g.restore(p.tb, group); err != nil {
			// A race with kube-proxy (it deleted or rewrote the key) or a
			// verdict whose chain is gone: the next pass reads again; at
			// worst kube-proxy's next full sync puts the element back.
			g.metrics.errors.WithLabelValues("restore").Inc()
			p.restoreErr = err
			g.log.Warn("restoring kube-proxy's ClusterIP entries failed; retrying", "services", group, "err", err)
			continue
		}
		for _, s := range group {
			g.log.Info("restored kube-proxy's ClusterIP entries of a Service no longer guarded", "service", s, "elements", len(p.tb.services[s].Cut))
		}
	}
}

// restore writes back kube-proxy's verdict and comment of every cut element
// of svcs, in one transaction (delete and add, as the cut).
func (g *Guard) restore(tb *table, svcs []types.NamespacedName) error {
	n := 0
	for _, svc := range svcs {
		for _, e := range tb.services[svc].Cut {
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
