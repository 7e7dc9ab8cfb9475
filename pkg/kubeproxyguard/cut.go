package kubeproxyguard

import (
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"k8s.io/apimachinery/pkg/types"
)

// maxOps bounds a transaction: the kernel acknowledges every message of a
// batch, and hundreds of acknowledgements overflow the socket's receive
// buffer (ENOBUFS). An element is two messages (delete, add). A Service is
// never split across transactions.
const maxOps = 64

// cutOnPath cuts every Service of the pass that kube-proxy routes by
// ClusterIP, in transactions of at most maxOps elements.
func (g *Guard) cutOnPath(p *pass) {
	p.cut = p.tb.onPathServices()
	p.cutDone = p.start
	p.cutErrs = map[types.NamespacedName]error{}
	for _, group := range chunk(p.cut, func(s types.NamespacedName) int { return 2 * len(p.tb.services[s].Elements) }) {
		if err := g.cut(p.tb, group); err != nil {
			for _, s := range group {
				p.cutErrs[s] = err
			}
		}
	}
	if len(p.cut) > 0 {
		p.cutDone = time.Now()
	}
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

// cut overwrites the ClusterIP entry points of svcs (their service-ips and
// no-endpoint-services elements keyed by a ClusterIP) in one transaction:
// each is deleted and added back with the same key, the verdict continue
// and the guard's comment (cutComment), which keeps kube-proxy's verdict
// and comment. A continue element routes nothing: nft_do_chain goes on to
// the next rule as when the vmap lookup misses, so an un-intercepted
// connection meets cluster-ips-check's REJECT. Overwriting rather than
// deleting keeps kube-proxy's own record (nftElementStorage) true about
// which keys exist, so its later delete of the key (Service deleted, or
// moved between the two maps) succeeds instead of failing its whole
// transaction. Nothing else changes: the Services' chains, affinity sets,
// NodePort, external-IP and load-balancer elements, and their cluster-ips
// elements stay as kube-proxy wrote them.
func (g *Guard) cut(tb *table, svcs []types.NamespacedName) error {
	n := 0
	for _, svc := range svcs {
		for _, e := range tb.services[svc].Elements {
			comment, kept := cutComment(e.Verdict, e.Comment)
			if !kept {
				g.log.Warn("kube-proxy's verdict and comment do not fit the cut's comment; when no longer guarded, the element comes back only with kube-proxy's next full sync",
					"service", svc, "element", e.Desc, "limit", maxCommentLen)
			}
			cont := &expr.Verdict{Kind: expr.VerdictContinue}
			if err := g.overwrite(e, cont, comment); err != nil {
				return err
			}
			n++
		}
	}
	if err := g.conn.Flush(); err != nil {
		g.metrics.errors.WithLabelValues("cut").Inc()
		return fmt.Errorf("cut %d Service(s) (%d elements): %w", len(svcs), n, err)
	}
	return nil
}

// overwrite queues the delete of e's key and its add with verdict v and
// comment: in one transaction, the key never goes missing, and the delete
// fails the transaction if someone removed the key meanwhile (the guard
// never adds a key kube-proxy did not write).
func (g *Guard) overwrite(e element, v *expr.Verdict, comment string) error {
	if err := g.conn.SetDeleteElements(e.Map, []nftables.SetElement{{Key: e.Key}}); err != nil {
		return fmt.Errorf("delete element of %s: %w", e.Map.Name, err)
	}
	if err := g.conn.SetAddElements(e.Map, []nftables.SetElement{{Key: e.Key, VerdictData: v, Comment: comment}}); err != nil {
		return fmt.Errorf("add element to %s: %w", e.Map.Name, err)
	}
	return nil
}
