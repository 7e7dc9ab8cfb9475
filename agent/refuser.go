// The refuser: the refuse table (internal/refuse) in every captured pod's netns, its set kept
// equal to the node's refused destinations, its counters read into the refusal metric and log.

package agent

import (
	"cmp"
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

// refusing is what every refuse table holds (internal/refuse Sets): the no-endpoints
// destinations, and the served VIPs with their declared ports (a SYN to one of the VIPs on
// another port is refused as port-not-declared), each VIP with the Service it names.
type refusing struct {
	noEndpoints refused
	vips        map[netip.Addr]k8stypes.NamespacedName
	declared    map[netip.AddrPort]struct{}
}

// refusingInForce is what the refuse tables hold: while contract.RefusalReset is in force, the
// no-endpoints destinations and the served VIPs (with every port they declare) inside the
// Service range, which is all the capture listener serves (outside it, or with the range
// unknown, every connection passes through to kube-proxy); nothing otherwise. A VIP two
// Services claim names the first by namespace and name; its declared ports are both's.
func refusingInForce(reset bool, p published, serviceRange []netip.Prefix, known bool) refusing {
	out := refusingNone()
	if !reset || !known {
		return out
	}
	in := func(a netip.Addr) bool {
		return slices.ContainsFunc(serviceRange, func(r netip.Prefix) bool { return r.Contains(a) })
	}
	for d, svc := range p.refused {
		if in(d.Addr()) {
			out.noEndpoints[d] = svc
		}
	}
	for svc, ports := range p.served {
		for _, d := range ports {
			if !in(d.Addr()) {
				continue
			}
			out.declared[d] = struct{}{}
			if o, ok := out.vips[d.Addr()]; !ok || byName(svc, o) < 0 {
				out.vips[d.Addr()] = svc
			}
		}
	}
	return out
}

// refusingNone refuses nothing.
func refusingNone() refusing {
	return refusing{noEndpoints: refused{}, vips: map[netip.Addr]k8stypes.NamespacedName{}, declared: map[netip.AddrPort]struct{}{}}
}

func byName(a, c k8stypes.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, c.Namespace), cmp.Compare(a.Name, c.Name))
}

// clone copies w, its maps never nil (shrink writes into them).
func (w refusing) clone() refusing {
	out := refusingNone()
	maps.Copy(out.noEndpoints, w.noEndpoints)
	maps.Copy(out.vips, w.vips)
	maps.Copy(out.declared, w.declared)
	return out
}

// sets are w as the table's sets, sorted.
func (w refusing) sets() refuse.Sets {
	return refuse.Sets{
		NoEndpoints: slices.SortedFunc(maps.Keys(w.noEndpoints), netip.AddrPort.Compare),
		VIPs:        slices.SortedFunc(maps.Keys(w.vips), netip.Addr.Compare),
		Declared:    slices.SortedFunc(maps.Keys(w.declared), netip.AddrPort.Compare),
	}
}

// only are the keys of a that b lacks, sorted.
func only[K interface {
	comparable
	Compare(K) int
}, V1, V2 any](a map[K]V1, b map[K]V2) []K {
	var out []K
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(x, y K) int { return x.Compare(y) })
	return out
}

// refuser keeps the refuse table of every captured pod's netns. The syncer calls shrink before
// a push and reconcile after it (syncer.sync): what stops being refused leaves every table
// before the push that may serve it (a no-endpoints destination before the endpoints that fill
// its cluster, a VIP before the push that drops its Service, a port enters the declared set
// before the push that serves it), and what starts being refused enters only after the push
// (a cluster published empty, a new VIP, a port no longer declared), so a SYN is never reset
// while the proxy serves its destination. collect, on a ticker, reads the counters. A netns is
// reached through its file's fd (refuse.Open), never by entering it on a thread.
type refuser struct {
	log *slog.Logger
	// add counts refusals in contract.MetricSvcRefused (xdsserver.Server.AddRefused); nil:
	// not counted.
	add func(reason string, svc k8stypes.NamespacedName, n uint64)

	mu   sync.Mutex
	pods map[string]*refusedPod // by netns path
	have refusing               // what every installed table holds
	gate ratelog.Keyed[string]  // the refusal lines, per pod
	done bool                   // closed: no table is installed any more
	warn ratelog.Keyed[string]  // the failures, per netns: a pod's netns going is routine
}

// refusedPod is one captured pod's table.
type refusedPod struct {
	pod       string // namespace/name
	path      string
	installed bool // the table is there with have in its sets
	// The counters when last read, per reason.
	last, lastUndeclared map[netip.AddrPort]uint64
	// conn is the lasting connection into the netns (refuse.Open), nil until needed and after
	// an error; release closes it. Held while the pod is listed: it keeps the netns.
	conn    *nftables.Conn
	release func()
}

func newRefuser(log *slog.Logger) *refuser {
	return &refuser{
		log: log, pods: map[string]*refusedPod{}, have: refusingNone(),
		gate: ratelog.Keyed[string]{Limit: ratelog.Limit{Burst: contract.RefusalLogBurst, Every: time.Second / contract.RefusalLogPerSecond}},
		warn: ratelog.Keyed[string]{Limit: ratelog.Limit{Burst: 1, Every: time.Minute}},
	}
}

// shrink takes out of every table what want no longer refuses: the no-endpoints destinations
// and VIPs not in want leave, want's declared ports enter; the syncer calls it before the push.
// A table that cannot be updated is deleted (the connection is then closed after accept, never
// reset while the proxy serves it).
func (r *refuser) shrink(want refusing) {
	r.mu.Lock()
	defer r.mu.Unlock()
	add := refuse.Sets{Declared: only(want.declared, r.have.declared)}
	del := refuse.Sets{NoEndpoints: only(r.have.noEndpoints, want.noEndpoints), VIPs: only(r.have.vips, want.vips)}
	if len(add.Declared) == 0 && len(del.NoEndpoints) == 0 && len(del.VIPs) == 0 {
		return
	}
	for _, p := range r.pods {
		if p.installed {
			r.update(p, add, del)
		}
	}
	for _, d := range del.NoEndpoints {
		delete(r.have.noEndpoints, d)
	}
	for _, a := range del.VIPs {
		delete(r.have.vips, a)
	}
	for _, d := range add.Declared {
		r.have.declared[d] = struct{}{}
	}
}

// reconcile makes every pod's table hold want, after the push that published want's clusters
// empty and dropped what it no longer declares: a pod no longer listed has its table deleted
// (counters read first), a new one gets the table with every set. With no pods (the setting
// off) every table goes.
func (r *refuser) reconcile(pods []agentstatus.ListenerStatus, want refusing) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		pods, want = nil, refusingNone()
	}
	listed := map[string]string{}
	for _, l := range pods {
		listed[l.Netns] = l.Namespace + "/" + l.Pod // the pod, not its listener
	}
	for path, p := range r.pods {
		if _, ok := listed[path]; !ok {
			r.drop(p)
			delete(r.pods, path)
		}
	}
	add := refuse.Sets{NoEndpoints: only(want.noEndpoints, r.have.noEndpoints), VIPs: only(want.vips, r.have.vips),
		Declared: only(want.declared, r.have.declared)}
	del := refuse.Sets{NoEndpoints: only(r.have.noEndpoints, want.noEndpoints), VIPs: only(r.have.vips, want.vips),
		Declared: only(r.have.declared, want.declared)}
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
	r.have = want.clone()
	all := r.have.sets()
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
	r.reconcile(nil, refusingNone())
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

// destinations is how many no-endpoints destinations the tables refuse (/status refusedAtSyn).
func (r *refuser) destinations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.have.noEndpoints)
}

func (r *refuser) install(p *refusedPod, all refuse.Sets) {
	err := r.in(p, func(c *nftables.Conn) error { return refuse.Install(c, all) })
	if err != nil {
		r.failed(p, "install the refuse table", err)
		return
	}
	p.installed, p.last, p.lastUndeclared = true, map[netip.AddrPort]uint64{}, map[netip.AddrPort]uint64{}
}

// update adds and deletes elements of p's table, reading its counters first when a
// destination or VIP goes (a deleted element's counter goes with it; a VIP's refusals are
// named by the VIP's Service). On failure the table is deleted and installed again by the
// next reconcile.
func (r *refuser) update(p *refusedPod, add, del refuse.Sets) {
	if len(del.NoEndpoints) > 0 || len(del.VIPs) > 0 {
		r.count(p)
	}
	if err := r.in(p, func(c *nftables.Conn) error { return refuse.Update(c, add, del) }); err != nil {
		r.failed(p, "update the refuse sets", err)
		_ = r.in(p, refuse.Remove)
		p.installed = false
		return
	}
	for _, d := range del.NoEndpoints {
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
	var counts refuse.Counted
	if err := r.in(p, func(c *nftables.Conn) (err error) { counts, err = refuse.Counts(c); return err }); err != nil {
		r.log.Debug("refuse counters not read", contract.LogKeyPod, p.pod, "netns", p.path, "error", err)
		return
	}
	now := time.Now()
	r.counted(p, now, contract.ReasonNoEndpoints, counts.NoEndpoints, p.last, func(d netip.AddrPort) (k8stypes.NamespacedName, bool) {
		svc, ok := r.have.noEndpoints[d]
		return svc, ok
	})
	// The rule's record forgets a destination UndeclaredIdle after its last SYN (read since):
	// one that is gone is forgotten here too, one that came back counts from 0 again.
	for d := range p.lastUndeclared {
		if _, ok := counts.NotDeclared[d]; !ok {
			delete(p.lastUndeclared, d)
		}
	}
	for d, n := range counts.NotDeclared {
		if n < p.lastUndeclared[d] {
			p.lastUndeclared[d] = 0
		}
	}
	r.counted(p, now, contract.ReasonPortNotDeclared, counts.NotDeclared, p.lastUndeclared, func(d netip.AddrPort) (k8stypes.NamespacedName, bool) {
		svc, ok := r.have.vips[d.Addr()]
		return svc, ok
	})
	r.gate.Flush(now) // forgets idle pods
}

// counted adds the gain of each destination's counter over last (then set to it) to the
// metric under reason and the Service svcOf names, and logs a line for it within the pod's
// limit; a destination svcOf does not know (it left) is not counted.
func (r *refuser) counted(p *refusedPod, now time.Time, reason string, counts, last map[netip.AddrPort]uint64,
	svcOf func(netip.AddrPort) (k8stypes.NamespacedName, bool)) {
	for _, d := range slices.SortedFunc(maps.Keys(counts), netip.AddrPort.Compare) {
		n, was := counts[d], last[d]
		last[d] = n
		svc, ok := svcOf(d)
		if n <= was || !ok {
			continue
		}
		if r.add != nil {
			r.add(reason, svc, n-was)
		}
		if r.gate.Allow(p.pod, now) {
			r.log.Info(contract.LogRefusal, contract.LogKeyReason, reason, contract.LogKeyNamespace, svc.Namespace,
				contract.LogKeyService, svc.Name, contract.LogKeyDestination, d.String(), contract.LogKeySourcePod, p.pod,
				contract.LogKeyFlag, contract.FlagReset, contract.LogKeyCount, n-was)
		}
	}
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
