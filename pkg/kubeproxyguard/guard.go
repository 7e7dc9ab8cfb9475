package kubeproxyguard

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/nftables"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Label chooses a Service: the guard cuts kube-proxy's ClusterIP entry
// points of every Service labelled Label=LabelValue, and keeps them cut.
const (
	Label      = contract.KubeProxyLabel
	LabelValue = contract.KubeProxyCut
)

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
	// RestoreUnchosen: the chosen set (SetServices) is every Service to
	// keep cut on the node, as in the DaemonSet (svclb-guard run). A pass
	// then puts back kube-proxy's verdict and comment on the cut elements
	// of every other Service: one that lost its label, left a selected
	// namespace, or did so while the guard was down. Not before the first
	// SetServices. The one-shot and watch commands leave it off: their
	// few Services are not the node's whole truth.
	RestoreUnchosen bool
	// Cut is how the chosen Services are cut: contract.GuardCutAll (the default, "" too):
	// kube-proxy's ClusterIP entries overwritten for every client; contract.GuardCutProxy:
	// only the node proxy's marked connections refused, in the guard's own table (proxycut.go).
	// A pass of either mode undoes what the other left: a proxy cut puts back the chosen
	// Services' overwritten entries; an all cut with RestoreUnchosen deletes the guard's table.
	Cut string
}

// Guard cuts kube-proxy's ClusterIP entry points (map elements) of chosen
// Services in one network namespace (verdict continue, see cut) and cuts
// them again whenever kube-proxy restores them.
type Guard struct {
	o       Options
	conn    *nftables.Conn
	log     *slog.Logger
	metrics *metrics

	passMu sync.Mutex // one reconcile pass at a time

	mu       sync.Mutex
	services map[types.NamespacedName]*serviceState
	refused  map[types.NamespacedName]string // chosen but never guarded → why
	// chosenKnown: SetServices was called; until then no Service counts
	// as unchosen (RestoreUnchosen).
	chosenKnown bool
	observed    time.Time // earliest nft event not yet handled by a pass
	st          Status    // node-level part of Status (Services filled on read)

	kick chan struct{}

	monMu sync.Mutex
	mon   *nftables.Monitor
}

type serviceState struct {
	since       time.Time
	state       string
	remaining   []ObjectRef
	cutPorts    []string   // as the last pass found them (ServiceStatus.CutPorts)
	proxyCut    []vipPort  // the proxy cut's elements of the Service (ServiceStatus.ProxyCut)
	keptPorts   []KeptPort // ServiceStatus.KubeProxyPorts
	deleted     map[ObjectRef]struct{}
	seenOff     bool // a pass saw the Service off kube-proxy's path
	deletions   int
	redeletions int
	lastRedel   time.Time
	lastLatency time.Duration
	errors      int
	lastError   string
	lastErrorAt time.Time
}

// New returns a Guard with no Service chosen.
func New(o Options) (*Guard, error) {
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch o.Cut {
	case "":
		o.Cut = contract.GuardCutAll
	case contract.GuardCutAll, contract.GuardCutProxy:
	default:
		return nil, fmt.Errorf("cut mode %q: want %q or %q", o.Cut, contract.GuardCutAll, contract.GuardCutProxy)
	}
	g := &Guard{
		o:        o,
		log:      o.Logger,
		metrics:  newMetrics(),
		services: map[types.NamespacedName]*serviceState{},
		refused:  map[types.NamespacedName]string{},
		kick:     make(chan struct{}, 1),
	}
	g.st.Node = o.NodeName
	g.st.Table = "ip " + TableName
	g.st.Cut = o.Cut
	if g.proxyMode() {
		g.st.ProxyCut = &ProxyCutStatus{Table: "ip " + contract.GuardTable, Set: contract.GuardProxyCutSet, Mark: fmt.Sprintf("%#x", contract.ProxyUpstreamMark)}
	}
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

// proxyMode: the proxy cut (Options.Cut).
func (g *Guard) proxyMode() bool { return g.o.Cut == contract.GuardCutProxy }

// RefusedAPIServer is why the guard never cuts contract.APIServerService.
const RefusedAPIServer = "the apiserver's Service stays on kube-proxy's path (Proposal 044, Non-goals); svclb never serves it"

// Refuse says why svc must never be guarded ("" when it may be).
func Refuse(svc types.NamespacedName) string {
	if svc == contract.APIServerService {
		return RefusedAPIServer
	}
	return ""
}

// SetServices replaces the set of chosen Services. A Service that leaves
// the set is no longer guarded: with Options.RestoreUnchosen the next pass
// puts its cut ClusterIP entries back as kube-proxy wrote them; without,
// they stay cut until kube-proxy's next full sync restores them (restart
// the node's kube-proxy pod to force one). A Service Refuse names is never guarded: it is logged once and
// listed in Status.Refused while it stays chosen.
func (g *Guard) SetServices(svcs []types.NamespacedName) {
	g.mu.Lock()
	want := map[types.NamespacedName]bool{}
	refused := map[types.NamespacedName]string{}
	changed := !g.chosenKnown
	g.chosenKnown = true
	for _, s := range svcs {
		if why := Refuse(s); why != "" {
			if _, said := g.refused[s]; !said {
				g.log.Warn("refusing to guard Service", "service", s, "reason", why)
			}
			refused[s] = why
			continue
		}
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
			if g.o.RestoreUnchosen {
				g.log.Info("no longer guarding Service; putting its ClusterIP entries back", "service", s)
			} else {
				g.log.Info("no longer guarding Service; kube-proxy restores it on its next full sync", "service", s)
			}
			changed = true
		}
	}
	g.refused = refused
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
