package kubeproxyguard

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// pass is what one Reconcile read, did and still has to do.
type pass struct {
	want     map[types.NamespacedName]bool // the chosen Services when the pass began
	start    time.Time
	observed time.Time // earliest nft event the pass handles (start if none)
	tb       *table

	cut     []types.NamespacedName // on kube-proxy's path: cut in this pass, sorted
	cutErrs map[types.NamespacedName]error
	cutDone time.Time // the cut transactions committed (start when none ran)

	del     []types.NamespacedName // chains due: deleted in this pass, sorted
	delErrs map[types.NamespacedName]error

	next time.Time // when chains are due next (zero: none pending)
}

// Reconcile runs one pass: it reads kube-proxy's table, cuts every chosen
// Service that is on kube-proxy's path again (one transaction: delete its
// map elements, flush its chains, delete its affinity sets) and deletes
// the chains of Services cut at least ChainDeleteDelay ago (a second
// transaction). It returns when the next pass is due for chain deletion
// (zero: none pending).
func (g *Guard) Reconcile() (next time.Time, err error) {
	g.passMu.Lock()
	defer g.passMu.Unlock()

	p := g.beginPass()
	defer func() { g.recordPass(p, err) }()
	if len(p.want) == 0 {
		return time.Time{}, nil
	}
	if g.conn == nil {
		if err := g.dial(); err != nil {
			return time.Time{}, err
		}
	}
	defer func() {
		if err != nil {
			g.redial()
		}
	}()

	p.tb, err = g.read(p.want)
	if errors.Is(err, errNoTable) {
		g.recordNoTable()
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	g.cutOnPath(p)
	g.deleteDueChains(p)
	g.recordServices(p)
	// A failed transaction's error repeats for every Service of its group:
	// one of each kind says it.
	return p.next, errors.Join(anyError(p.cutErrs), anyError(p.delErrs))
}

// beginPass takes the chosen Services and the pending nft event time.
func (g *Guard) beginPass() *pass {
	g.mu.Lock()
	p := &pass{observed: g.observed, want: make(map[types.NamespacedName]bool, len(g.services))}
	g.observed = time.Time{}
	for s := range g.services {
		p.want[s] = true
	}
	g.mu.Unlock()

	p.start = time.Now()
	if p.observed.IsZero() {
		p.observed = p.start
	}
	g.metrics.passes.Inc()
	return p
}

func anyError(errs map[types.NamespacedName]error) error {
	for _, e := range errs {
		return e
	}
	return nil
}
