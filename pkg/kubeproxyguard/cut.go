package kubeproxyguard

import (
	"fmt"
	"time"

	"github.com/google/nftables"
	"k8s.io/apimachinery/pkg/types"
)

// maxOps bounds a transaction: the kernel acknowledges every message of a
// batch, and hundreds of acknowledgements overflow the socket's receive
// buffer (ENOBUFS). A Service is never split across transactions.
const maxOps = 64

// chainRetryDelay is the wait before retrying a failed chain deletion.
const chainRetryDelay = 200 * time.Millisecond

// cutOnPath cuts every Service of the pass that is on kube-proxy's path
// (transaction 1).
func (g *Guard) cutOnPath(p *pass) {
	p.cut = p.tb.needingCut()
	p.cutDone = p.start
	p.cutErrs = g.inTransactions(p.cut, (*objects).cutOps, p.tb, g.cut)
	if len(p.cut) > 0 {
		p.cutDone = time.Now()
	}
}

// deleteDueChains deletes the chains of the Services cut at least
// ChainDeleteDelay ago (transaction 2) and sets when the next are due.
func (g *Guard) deleteDueChains(p *pass) {
	p.del, p.next = g.chainsDue(p.tb, p.start)
	p.delErrs = g.inTransactions(p.del, func(o *objects) int { return len(o.Chains) }, p.tb, g.deleteChains)
}

// inTransactions commits svcs, in order, in transactions of at most maxOps
// operations, and returns the error of each Service whose transaction
// failed.
func (g *Guard) inTransactions(svcs []types.NamespacedName, ops func(*objects) int, tb *table,
	commit func(*table, []types.NamespacedName) error) map[types.NamespacedName]error {
	errs := map[types.NamespacedName]error{}
	for _, group := range chunk(svcs, func(s types.NamespacedName) int { return ops(tb.services[s]) }) {
		if err := commit(tb, group); err != nil {
			for _, s := range group {
				errs[s] = err
			}
		}
	}
	return errs
}

// chunk groups svcs, in order, into groups of at most maxOps operations.
func chunk(svcs []types.NamespacedName, ops func(types.NamespacedName) int) [][]types.NamespacedName {
	var groups [][]types.NamespacedName
	var cur []types.NamespacedName
	n := 0
	for _, s := range svcs {
		k := ops(s)
		if len(cur) > 0 && n+k > maxOps {
			groups = append(groups, cur)
			cur, n = nil, 0
		}
		cur = append(cur, s)
		n += k
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// cut takes Services off kube-proxy's path in one transaction: map elements
// first, then the chains' rules, then the affinity sets (which only the
// flushed rules referenced). cluster-ips is left alone.
func (g *Guard) cut(tb *table, svcs []types.NamespacedName) error {
	n := 0
	for _, svc := range svcs {
		o := tb.services[svc]
		byMap := map[*nftables.Set][]nftables.SetElement{}
		var maps []*nftables.Set
		for _, e := range o.Elements {
			if byMap[e.Map] == nil {
				maps = append(maps, e.Map)
			}
			byMap[e.Map] = append(byMap[e.Map], nftables.SetElement{Key: e.Elem.Key})
		}
		for _, m := range maps {
			if err := g.conn.SetDeleteElements(m, byMap[m]); err != nil {
				return fmt.Errorf("delete elements of %s: %w", m.Name, err)
			}
			n += len(byMap[m])
		}
	}
	for _, svc := range svcs {
		for _, c := range tb.services[svc].Chains {
			if c.Rules > 0 {
				g.conn.FlushChain(&nftables.Chain{Table: tb.t, Name: c.Name})
				n++
			}
		}
	}
	for _, svc := range svcs {
		for _, s := range tb.services[svc].Sets {
			g.conn.DelSet(&nftables.Set{Table: tb.t, Name: s})
			n++
		}
	}
	if err := g.conn.Flush(); err != nil {
		g.metrics.errors.WithLabelValues("cut").Inc()
		return fmt.Errorf("cut %d Service(s) (%d operations): %w", len(svcs), n, err)
	}
	return nil
}

// chainsDue lists, sorted, the Services whose chains are left empty and
// were cut at least ChainDeleteDelay before now (or whose failed deletion
// is due for a retry), and returns when the next of the others is due.
func (g *Guard) chainsDue(tb *table, now time.Time) (due []types.NamespacedName, next time.Time) {
	g.mu.Lock()
	for svc, o := range tb.services {
		st := g.services[svc]
		if st == nil || o.needsCut() || len(o.Chains) == 0 {
			continue
		}
		if st.cutAt.IsZero() {
			// Empty chains left over (a previous guard, or kube-proxy's
			// own stale chains): start the clock now.
			st.cutAt = now
		}
		d := st.cutAt.Add(ChainDeleteDelay)
		if !st.chainRetryAt.IsZero() && st.chainRetryAt.After(d) {
			d = st.chainRetryAt
		}
		if !now.Before(d) {
			due = append(due, svc)
		} else {
			next = sooner(next, d)
		}
	}
	g.mu.Unlock()
	sortNames(due)
	return due, next
}

// deleteChains deletes the (empty) chains of svcs in one transaction.
func (g *Guard) deleteChains(tb *table, svcs []types.NamespacedName) error {
	for _, svc := range svcs {
		for _, c := range tb.services[svc].Chains {
			g.conn.DelChain(&nftables.Chain{Table: tb.t, Name: c.Name})
		}
	}
	if err := g.conn.Flush(); err != nil {
		g.metrics.errors.WithLabelValues("delete-chains").Inc()
		return fmt.Errorf("delete chains of %d Service(s): %w", len(svcs), err)
	}
	return nil
}
