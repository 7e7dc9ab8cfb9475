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

// cutOnPath cuts every Service of the pass that kube-proxy routes by
// ClusterIP, in transactions of at most maxOps elements.
func (g *Guard) cutOnPath(p *pass) {
	p.cut = p.tb.onPathServices()
	p.cutDone = p.start
	p.cutErrs = map[types.NamespacedName]error{}
	for _, group := range chunk(p.cut, func(s types.NamespacedName) int { return len(p.tb.services[s].Elements) }) {
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

// cut deletes the ClusterIP entry points of svcs (their service-ips and
// no-endpoint-services elements keyed by a ClusterIP) in one transaction.
// Nothing else changes: the Services' chains, affinity sets, NodePort,
// external-IP and load-balancer elements, and their cluster-ips elements
// stay as kube-proxy wrote them.
func (g *Guard) cut(tb *table, svcs []types.NamespacedName) error {
	n := 0
	for _, svc := range svcs {
		byMap := map[*nftables.Set][]nftables.SetElement{}
		var maps []*nftables.Set
		for _, e := range tb.services[svc].Elements {
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
	if err := g.conn.Flush(); err != nil {
		g.metrics.errors.WithLabelValues("cut").Inc()
		return fmt.Errorf("cut %d Service(s) (%d elements): %w", len(svcs), n, err)
	}
	return nil
}
