// The refuser: the refuse table (internal/refuse) in every captured pod's netns, its set kept
// equal to the node's refused destinations, its counters read into the refusal metric and log.

package agent

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/ratelog"
	"github.com/aether-mesh/svclb/internal/refuse"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// refused maps each refused destination (a Service port's VIP:port whose svc: cluster has no
// endpoint for the node) to its Service.
type refused = map[netip.AddrPort]k8stypes.NamespacedName

// refuser keeps the refuse table of every captured pod's netns. The syncer calls shrink before
// a push and reconcile after it (syncer.sync): a destination leaves every set before the
// endpoints that fill its cluster are published, and enters only after its cluster was
// published empty, so a SYN is never reset while the proxy knows a host. collect, on a ticker,
// reads the counters. A netns is reached through its file's fd (refuse.Open), never by
// entering it on a thread.
type refuser struct {
	log *slog.Logger
	// add counts refusals in contract.MetricSvcRefused (xdsserver.Server.AddRefused); nil:
	// not counted.
	add func(reason string, svc k8stypes.NamespacedName, n uint64)

	mu   sync.Mutex
	pods map[string]*refusedPod // by netns path
	have refused                // what every installed table's set holds
	gate ratelog.Keyed[string]  // the refusal lines, per pod
	done bool                   // closed: no table is installed any more
	warn ratelog.Keyed[string]  // the failures, per netns: a pod's netns going is routine
}

// refusedPod is one captured pod's table.
type refusedPod struct {
	pod       string // namespace/name
	path      string
	installed bool                      // the table is there with have in its set
	last      map[netip.AddrPort]uint64 // the counters when last read
	// conn is the lasting connection into the netns (refuse.Open), nil until needed and after
	// an error; release closes it. Held while the pod is listed: it keeps the netns.
	conn    *nftables.Conn
	release func()
}

func newRefuser(log *slog.Logger) *refuser {
	return &refuser{
		log: log, pods: map[string]*refusedPod{}, have: refused{},
		gate: ratelog.Keyed[string]{Limit: ratelog.Limit{Burst: contract.RefusalLogBurst, Every: time.Second / contract.RefusalLogPerSecond}},
		warn: ratelog.Keyed[string]{Limit: ratelog.Limit{Burst: 1, Every: time.Minute}},
	}
}

// shrink deletes from every table the destinations not in want; the syncer calls it before
// publishing the endpoints that fill them. A table that cannot be updated is deleted (the
// connection is then closed after accept, never reset while a host is known).
func (r *refuser) shrink(want refused) {
	r.mu.Lock()
	defer r.mu.Unlock()
	del := r.missing(want)
	if len(del) == 0 {
		return
	}
	for _, p := range r.pods {
		if p.installed {
			r.update(p, nil, del)
		}
	}
	for _, d := range del {
		delete(r.have, d)
	}
}

// reconcile makes every pod's table hold want, after the push that published want's clusters
// empty: a pod no longer listed has its table deleted (counters read first), a new one gets
// the table with the whole set. With no pods (the setting off) every table goes.
func (r *refuser) reconcile(pods []agentstatus.ListenerStatus, want refused) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		pods, want = nil, nil
	}
	listed := map[string]string{}
	for _, l := range pods {
		listed[l.Netns] = l.Namespace + "/" + l.Name
	}
	for path, p := range r.pods {
		if _, ok := listed[path]; !ok {
			r.drop(p)
			delete(r.pods, path)
		}
	}
	del := r.missing(want)
	var add []netip.AddrPort
	for d := range want {
		if _, ok := r.have[d]; !ok {
			add = append(add, d)
		}
	}
	slices.SortFunc(add, netip.AddrPort.Compare)
	for path, pod := range listed {
		p := r.pods[path]
		if p == nil {
			p = &refusedPod{pod: pod, path: path}
			r.pods[path] = p
		}
		p.pod = pod
		if p.installed {
			r.update(p, add, del)
		}
	}
	r.have = maps.Clone(want)
	if r.have == nil {
		r.have = refused{}
	}
	all := slices.SortedFunc(maps.Keys(r.have), netip.AddrPort.Compare)
	for _, p := range r.pods {
		if !p.installed {
			r.install(p, all)
		}
	}
}

// close deletes every table, for good: a sync still running when the agent stops installs
// none again.
func (r *refuser) close() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.reconcile(nil, nil)
}

// missing are have's destinations not in want, sorted.
func (r *refuser) missing(want refused) []netip.AddrPort {
	var del []netip.AddrPort
	for d := range r.have {
		if _, ok := want[d]; !ok {
			del = append(del, d)
		}
	}
	slices.SortFunc(del, netip.AddrPort.Compare)
	return del
}

// collect reads every table's counters into the metric and the log.
func (r *refuser) collect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.installed {
			r.count(p)
		}
	}
}

// run collects every interval until ctx ends.
func (r *refuser) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.collect()
		}
	}
}

// destinations is how many destinations the tables refuse (/status refusedAtSyn).
func (r *refuser) destinations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.have)
}

func (r *refuser) install(p *refusedPod, all []netip.AddrPort) {
	err := r.in(p, func(c *nftables.Conn) error { return refuse.Install(c, all) })
	if err != nil {
		r.failed(p, "install the refuse table", err)
		return
	}
	p.installed, p.last = true, map[netip.AddrPort]uint64{}
}

// update adds and deletes destinations in p's table, reading its counters first (a deleted
// element's counter goes with it). On failure the table is deleted and installed again by the
// next reconcile.
func (r *refuser) update(p *refusedPod, add, del []netip.AddrPort) {
	if len(add) == 0 && len(del) == 0 {
		return
	}
	if len(del) > 0 {
		r.count(p)
	}
	if err := r.in(p, func(c *nftables.Conn) error { return refuse.Update(c, add, del) }); err != nil {
		r.failed(p, "update the refuse set", err)
		_ = r.in(p, refuse.Remove)
		p.installed = false
		return
	}
	for _, d := range del {
		delete(p.last, d)
	}
}

// drop deletes p's table, its counters read first; its netns may be gone already.
func (r *refuser) drop(p *refusedPod) {
	if !p.installed {
		p.closeConn()
		return
	}
	r.count(p)
	if err := r.in(p, refuse.Remove); err != nil {
		r.log.Debug("refuse table not deleted (the pod's netns may be gone)", contract.LogKeyPod, p.pod, "netns", p.path, "error", err)
	}
	p.installed = false
	p.closeConn()
}

// count adds what p's counters gained since last read to the metric, and logs one line per
// destination that was refused, within the pod's limit.
func (r *refuser) count(p *refusedPod) {
	var counts map[netip.AddrPort]uint64
	if err := r.in(p, func(c *nftables.Conn) (err error) { counts, err = refuse.Counts(c); return err }); err != nil {
		r.log.Debug("refuse counters not read", contract.LogKeyPod, p.pod, "netns", p.path, "error", err)
		return
	}
	now := time.Now()
	for _, d := range slices.SortedFunc(maps.Keys(counts), netip.AddrPort.Compare) {
		n, last := counts[d], p.last[d]
		p.last[d] = n
		svc, ok := r.have[d]
		if n <= last || !ok {
			continue
		}
		if r.add != nil {
			r.add(contract.ReasonNoEndpoints, svc, n-last)
		}
		if r.gate.Allow(p.pod, now) {
			r.log.Info(contract.LogRefusal, contract.LogKeyReason, contract.ReasonNoEndpoints, contract.LogKeyNamespace, svc.Namespace,
				contract.LogKeyService, svc.Name, contract.LogKeyDestination, d.String(), contract.LogKeyPod, p.pod,
				contract.LogKeyFlag, contract.FlagReset, contract.LogKeyCount, n-last)
		}
	}
	r.gate.Flush(now) // forgets idle pods
}

func (r *refuser) failed(p *refusedPod, what string, err error) {
	if r.warn.Allow(p.path, time.Now()) {
		r.log.Warn("could not "+what+" in a captured pod's netns; its refused connections are closed after accept",
			contract.LogKeyPod, p.pod, "netns", p.path, "error", err)
	}
}

// in runs fn with p's connection into its netns, opened if need be. After an error the
// connection is closed (a lasting netlink socket may hold the failed transaction's replies):
// the next call opens a new one.
func (r *refuser) in(p *refusedPod, fn func(*nftables.Conn) error) error {
	if p.conn == nil {
		c, release, err := refuse.Open(p.path)
		if err != nil {
			return err
		}
		p.conn, p.release = c, release
	}
	err := fn(p.conn)
	if err != nil {
		p.closeConn()
	}
	return err
}

func (p *refusedPod) closeConn() {
	if p.conn != nil {
		p.release()
		p.conn, p.release = nil, nil
	}
}
