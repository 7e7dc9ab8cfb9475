package kubeproxyguard

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// pass is what one Reconcile read and did.
type pass struct {
	want map[types.NamespacedName]bool // the chosen Services when the pass began
	// authoritative: want is every Service to keep cut on the node
	// (Options.RestoreUnchosen, and SetServices was called): put back the
	// cut elements of every other Service.
	authoritative bool
	start         time.Time
	observed      time.Time // earliest nft event the pass handles (start if none)
	tb            *table

	cut     []types.NamespacedName // on kube-proxy's ClusterIP path: cut in this pass, sorted
	cutErrs map[types.NamespacedName]error
	cutDone time.Time // the cut transactions committed (start when none ran)

	restoreErr  error                          // the last failed restore transaction
	restoreErrs map[types.NamespacedName]error // of chosen Services (their stale cuts)

	// The proxy cut (Options.Cut contract.GuardCutProxy; removeProxyCut's error in an all cut).
	proxyWant   map[types.NamespacedName][]vipPort // per chosen Service, what its set should refuse
	proxyHave   map[vipPort]bool                   // in the set when the pass read it
	proxyAdded  map[vipPort]bool                   // added to the set in this pass
	proxyErr    error                              // reading or writing the guard's table failed
	proxyResets uint64                             // the rule's counter as the pass read it
}

// Reconcile runs one pass: it reads kube-proxy's ClusterIP entry points of
// the chosen Services and cuts those of ports the meshed path takes over
// that it finds on kube-proxy's path (kube-proxy wrote them first, or
// restored them), puts back those of the other ports that a guard cut, and
// with Options.RestoreUnchosen puts back the cut ones of Services no longer
// chosen.
func (g *Guard) Reconcile() (err error) {
	g.passMu.Lock()
	defer g.passMu.Unlock()

	p := g.beginPass()
	defer func() { g.recordPass(p, err) }()
	if len(p.want) == 0 && !p.authoritative {
		return nil
	}
	if g.conn == nil {
		if err := g.dial(); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			g.redial()
		}
	}()

	p.tb, err = g.read(p.want)
	if errors.Is(err, errNoTable) {
		p.tb = nil
		if g.proxyMode() {
			g.syncProxyCut(p) // nothing to refuse: what kube-proxy does not serve needs no cut
		}
		g.recordNoTable(p)
		return p.proxyErr
	}
	if err != nil {
		return err
	}
	if g.proxyMode() {
		// The set first: an all cut put back in this pass is refused to the proxy before
		// kube-proxy's verdict returns.
		g.syncProxyCut(p)
		g.restoreCuts(p)
		g.recordProxyServices(p)
	} else {
		g.cutOnPath(p)
		g.restoreCuts(p)
		g.removeProxyCut(p)
		g.recordServices(p)
	}
	// A failed transaction's error repeats for every Service of its group:
	// one says it.
	for _, e := range p.cutErrs {
		return e
	}
	return errors.Join(p.proxyErr, p.restoreErr)
}

// beginPass takes the chosen Services and the pending nft event time.
func (g *Guard) beginPass() *pass {
	g.mu.Lock()
	p := &pass{observed: g.observed, want: make(map[types.NamespacedName]bool, len(g.services)),
		authoritative: g.o.RestoreUnchosen && g.chosenKnown, restoreErrs: map[types.NamespacedName]error{}}
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
