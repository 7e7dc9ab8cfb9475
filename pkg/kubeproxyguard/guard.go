package kubeproxyguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/google/nftables"
	"k8s.io/apimachinery/pkg/types"
)

// Label chooses a Service: the guard deletes kube-proxy's objects of every
// Service labelled Label=LabelValue, and keeps deleting them.
const (
	Label      = contract.KubeProxyLabel
	LabelValue = contract.KubeProxyCut
)

// ChainDeleteDelay is how long the guard waits between cutting a Service
// (elements deleted, chains flushed) and deleting its chains. kube-proxy
// waits as long: kernels before 6.2 release a deleted map element's
// reference to its chain late, so an earlier delete fails with EBUSY.
const ChainDeleteDelay = time.Second

// Options configure a Guard.
type Options struct {
	// NodeName is reported in Status.
	NodeName string
	// NetNS is an open fd of the network namespace whose kube-proxy table
	// to guard; 0 means the caller's namespace.
	NetNS int
	// Resync is the period of the full reconcile that backs up the nft
	// monitor (default 1s: even with the monitor lost, a restore is cut
	// within about a second; a pass that finds nothing costs a few netlink
	// dumps).
	Resync time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Guard deletes kube-proxy's nftables objects of chosen Services in one
// network namespace and deletes them again whenever they come back.
type Guard struct {
	o       Options
	conn    *nftables.Conn
	log     *slog.Logger
	metrics *metrics

	passMu sync.Mutex // one reconcile pass at a time

	mu       sync.Mutex
	services map[types.NamespacedName]*serviceState
	observed time.Time // earliest nft event not yet handled by a pass
	st       Status    // node-level part of Status (Services filled on read)

	kick chan struct{}

	monMu sync.Mutex
	mon   *nftables.Monitor
}

type serviceState struct {
	since        time.Time
	state        string
	remaining    []ObjectRef
	deleted      map[ObjectRef]struct{}
	seenOff      bool      // a pass saw the Service off kube-proxy's path
	cutAt        time.Time // last cut, or first sight of leftover empty chains
	deletions    int
	redeletions  int
	lastRedel    time.Time
	lastLatency  time.Duration
	errors       int
	lastError    string
	lastErrorAt  time.Time
	chainRetryAt time.Time
}

// New returns a Guard with no Service chosen.
func New(o Options) (*Guard, error) {
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g := &Guard{
		o:        o,
		log:      o.Logger,
		metrics:  newMetrics(),
		services: map[types.NamespacedName]*serviceState{},
		kick:     make(chan struct{}, 1),
	}
	g.st.Node = o.NodeName
	g.st.Table = "ip " + TableName
	if err := g.dial(); err != nil {
		return nil, err
	}
	return g, nil
}

// dial opens the guard's netlink socket. It is a lasting one: a pass makes
// a dozen requests, and a fresh socket per request (worse: a thread switched
// into another namespace per request) would dominate the re-deletion latency.
func (g *Guard) dial() error {
	c, err := nftables.New(nftables.WithNetNSFd(g.o.NetNS), nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("nftables connection: %w", err)
	}
	g.conn = c
	return nil
}

// redial replaces the socket after an error: queued messages or unread
// acknowledgements must not leak into the next pass.
func (g *Guard) redial() {
	if g.conn != nil {
		_ = g.conn.CloseLasting()
		g.conn = nil
	}
}

// Close releases the netlink socket. Run and Reconcile must have returned.
func (g *Guard) Close() error {
	g.passMu.Lock()
	defer g.passMu.Unlock()
	g.redial()
	return nil
}

// SetServices replaces the set of chosen Services. A Service that leaves
// the set is no longer guarded; its objects stay deleted until kube-proxy's
// next full sync restores them (restart the node's kube-proxy pod to force
// one).
func (g *Guard) SetServices(svcs []types.NamespacedName) {
	g.mu.Lock()
	want := map[types.NamespacedName]bool{}
	changed := false
	for _, s := range svcs {
		want[s] = true
		if g.services[s] == nil {
			g.services[s] = &serviceState{since: time.Now(), state: StateUnknown, deleted: map[ObjectRef]struct{}{}}
			g.log.Info("guarding Service", "service", s)
			changed = true
		}
	}
	for s := range g.services {
		if !want[s] {
			delete(g.services, s)
			g.metrics.forget(s)
			g.log.Info("no longer guarding Service; kube-proxy restores it on its next full sync", "service", s)
		}
	}
	g.metrics.guarded.Set(float64(len(g.services)))
	g.mu.Unlock()
	if changed {
		g.trigger()
	}
}

// trigger asks Run for a pass soon.
func (g *Guard) trigger() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// observe records that kube-proxy (or anyone) wrote to nftables at t.
func (g *Guard) observe(t time.Time) {
	g.mu.Lock()
	if g.observed.IsZero() {
		g.observed = t
	}
	g.mu.Unlock()
	g.trigger()
}

// Run guards until ctx ends: an nft monitor triggers a pass on every
// write, and a pass also runs every Options.Resync, and when a Service's
// chains are due for deletion.
func (g *Guard) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.monitorLoop(ctx) }()
	defer wg.Wait()

	resync := time.NewTicker(g.o.Resync)
	defer resync.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	backoff := 50 * time.Millisecond
	g.trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.kick:
		case <-resync.C:
		case <-due.C:
		}
		next, err := g.Reconcile()
		if err != nil {
			// Most failures are races with kube-proxy's own transactions
			// (an element it removed, a chain it re-referenced): read again.
			if r := time.Now().Add(backoff); next.IsZero() || r.Before(next) {
				next = r
			}
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 50 * time.Millisecond
		}
		if !next.IsZero() {
			due.Reset(max(time.Until(next), time.Millisecond))
		}
	}
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

	g.mu.Lock()
	observed := g.observed
	g.observed = time.Time{}
	want := make(map[types.NamespacedName]bool, len(g.services))
	for s := range g.services {
		want[s] = true
	}
	g.mu.Unlock()

	start := time.Now()
	if observed.IsZero() {
		observed = start
	}
	g.metrics.passes.Inc()
	defer func() {
		g.mu.Lock()
		g.st.Passes++
		g.st.LastPass = start
		g.st.LastPassError = ""
		if err != nil {
			g.st.LastPassError = err.Error()
		}
		g.mu.Unlock()
	}()
	if len(want) == 0 {
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

	tb, err := readTable(g.conn, want)
	if errors.Is(err, errNoTable) {
		g.mu.Lock()
		g.st.TablePresent = false
		for _, s := range g.services {
			s.state, s.remaining, s.seenOff = StateClean, nil, true
		}
		g.mu.Unlock()
		return time.Time{}, nil
	}
	if err != nil {
		g.metrics.errors.WithLabelValues("read").Inc()
		return time.Time{}, fmt.Errorf("read table ip %s: %w", TableName, err)
	}

	// Transaction 1: cut.
	var cut []types.NamespacedName
	for svc, o := range tb.services {
		if o.needsCut() {
			cut = append(cut, svc)
		}
	}
	sort.Slice(cut, func(i, j int) bool { return cut[i].String() < cut[j].String() })
	cutErrs := map[types.NamespacedName]error{}
	done := start
	if len(cut) > 0 {
		for _, group := range chunk(cut, func(s types.NamespacedName) int { return tb.services[s].cutOps() }) {
			if err := g.cut(tb, group); err != nil {
				for _, s := range group {
					cutErrs[s] = err
				}
			}
		}
		done = time.Now()
	}

	// Transaction 2: delete the chains of Services cut long enough ago.
	g.mu.Lock()
	var del []types.NamespacedName
	for svc, o := range tb.services {
		st := g.services[svc]
		if st == nil || o.needsCut() || len(o.Chains) == 0 {
			continue
		}
		if st.cutAt.IsZero() {
			// Empty chains left over (a previous guard, or kube-proxy's
			// own stale chains): start the clock now.
			st.cutAt = start
		}
		d := st.cutAt.Add(ChainDeleteDelay)
		if !st.chainRetryAt.IsZero() && st.chainRetryAt.After(d) {
			d = st.chainRetryAt
		}
		if !start.Before(d) {
			del = append(del, svc)
		} else if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	g.mu.Unlock()
	delErrs := map[types.NamespacedName]error{}
	sort.Slice(del, func(i, j int) bool { return del[i].String() < del[j].String() })
	for _, group := range chunk(del, func(s types.NamespacedName) int { return len(tb.services[s].Chains) }) {
		if err := g.deleteChains(tb, group); err != nil {
			for _, s := range group {
				delErrs[s] = err
			}
		}
	}

	// Record what this pass saw and did.
	g.mu.Lock()
	g.st.TablePresent = true
	for svc, st := range g.services {
		if !want[svc] {
			continue
		}
		o := tb.services[svc]
		if o == nil {
			o = &objects{}
		}
		switch {
		case slices.Contains(cut, svc):
			if err := cutErrs[svc]; err != nil {
				g.fail(svc, st, err)
				st.state, st.remaining = StateOnPath, o.names()
				continue
			}
			for _, r := range o.names() {
				if r.Kind != KindChain {
					st.deleted[r] = struct{}{}
				}
			}
			st.deletions++
			g.metrics.deletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
			if st.seenOff {
				st.redeletions++
				st.lastRedel = done
				st.lastLatency = done.Sub(observed)
				g.metrics.redeletions.WithLabelValues(svc.Namespace, svc.Name).Inc()
				g.metrics.latency.Observe(st.lastLatency.Seconds())
				g.log.Info("re-deleted kube-proxy objects", "service", svc, "latency", st.lastLatency)
			} else {
				g.log.Info("deleted kube-proxy objects", "service", svc, "objects", len(o.names()))
			}
			st.seenOff = true
			st.cutAt = done
			st.chainRetryAt = time.Time{}
			st.state, st.remaining = StateCut, chainRefs(o)
			if d := done.Add(ChainDeleteDelay); next.IsZero() || d.Before(next) {
				next = d
			}
		case slices.Contains(del, svc):
			if err := delErrs[svc]; err != nil {
				g.fail(svc, st, err)
				st.chainRetryAt = time.Now().Add(200 * time.Millisecond)
				st.state, st.remaining = StateCut, chainRefs(o)
				continue
			}
			for _, c := range o.Chains {
				st.deleted[ObjectRef{Kind: KindChain, Name: c.Name}] = struct{}{}
			}
			st.seenOff = true
			st.cutAt, st.chainRetryAt = time.Time{}, time.Time{}
			st.state, st.remaining = StateClean, nil
			g.log.Info("deleted kube-proxy chains", "service", svc, "chains", len(o.Chains))
		case o.empty():
			st.seenOff = true
			st.cutAt = time.Time{}
			st.state, st.remaining = StateClean, nil
		default: // only empty chains, not yet due
			st.seenOff = true
			st.state, st.remaining = StateCut, chainRefs(o)
		}
		g.metrics.onPath.WithLabelValues(svc.Namespace, svc.Name).Set(boolFloat(st.state == StateOnPath))
	}
	g.mu.Unlock()
	for _, e := range cutErrs {
		err = errors.Join(err, e)
		break // the same error repeats for every Service of a group
	}
	for _, e := range delErrs {
		err = errors.Join(err, e)
		break
	}
	return next, err
}

// maxOps bounds a transaction: the kernel acknowledges every message of a
// batch, and hundreds of acknowledgements overflow the socket's receive
// buffer (ENOBUFS). A Service is never split across transactions.
const maxOps = 64

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

func (g *Guard) fail(svc types.NamespacedName, st *serviceState, err error) {
	st.errors++
	st.lastError = err.Error()
	st.lastErrorAt = time.Now()
	g.log.Warn("guard transaction failed; retrying", "service", svc, "err", err)
}

func chainRefs(o *objects) []ObjectRef {
	var r []ObjectRef
	for _, c := range o.Chains {
		r = append(r, ObjectRef{Kind: KindChain, Name: c.Name})
	}
	return r
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
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

// DeleteNow cuts the chosen Services and deletes their chains, waiting
// ChainDeleteDelay in between, and returns when every one of them is gone
// from kube-proxy's table (or ctx ends). It is the one-shot form of Run.
func (g *Guard) DeleteNow(ctx context.Context) error {
	for {
		next, err := g.Reconcile()
		if err == nil && next.IsZero() {
			return nil
		}
		wait := 100 * time.Millisecond
		if err == nil {
			wait = max(time.Until(next), time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}
