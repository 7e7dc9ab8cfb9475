package agent

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/aether-mesh/svclb/pkg/contract"

	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// CDSMode says which svc: clusters the agent publishes.
type CDSMode string

const (
	// CDSProactive publishes a cluster for every known Service port (the default).
	CDSProactive CDSMode = "proactive"
	// CDSOnDemand publishes only the clusters the node proxy asked for (ODCDS over ADS).
	CDSOnDemand CDSMode = "on-demand"
)

// ParseCDSMode parses a --cds flag or ConfigMap value.
func ParseCDSMode(s string) (CDSMode, error) {
	switch m := CDSMode(s); m {
	case CDSProactive, CDSOnDemand:
		return m, nil
	}
	return "", fmt.Errorf("CDS mode %q: want %q or %q", s, CDSProactive, CDSOnDemand)
}

// Refusal reasons of svclb_ondemand_refused_total.
const (
	refusedMalformed = "malformed"
	refusedOverCap   = "over-cap"
)

// refusalReasons are every label value of svclb_ondemand_refused_total, created up front so
// a dashboard sees zeros rather than missing series.
var refusalReasons = []string{refusedMalformed, svcindex.External.String(), svcindex.NoService.String(),
	svcindex.PortNotDeclared.String(), refusedOverCap}

const (
	// DefaultOnDemandMax bounds the admitted set (--on-demand-max).
	DefaultOnDemandMax = 10000
	// maxPending bounds the refused names remembered for later admission.
	maxPending = 1024
	// demandFileVersion is the "version" of the demand file format.
	demandFileVersion = 1
)

// demandOp is one name of a delta CDS request: subscribed or unsubscribed.
type demandOp struct {
	name      string
	subscribe bool
}

// demand is the on-demand state, owned by the sync goroutine.
type demand struct {
	max      int
	file     string
	admitted map[string]k8stypes.NamespacedName // name → the Service port's owner
	perSvc   map[k8stypes.NamespacedName]int    // admitted names per Service
	pending  pendingSet
	checked  uint64 // index version the admitted and pending names were last classified at
	changed  bool   // the admitted set differs from the file
}

func newDemand(max int, file string) *demand {
	return &demand{max: max, file: file, admitted: map[string]k8stypes.NamespacedName{},
		perSvc: map[k8stypes.NamespacedName]int{}, pending: newPendingSet(maxPending)}
}

func (d *demand) admit(name string, svc k8stypes.NamespacedName) {
	d.admitted[name] = svc
	d.perSvc[svc]++
	d.changed = true
}

// drop removes name from the admitted set and returns the Service it belonged to.
func (d *demand) drop(name string) (k8stypes.NamespacedName, bool) {
	svc, ok := d.admitted[name]
	if !ok {
		return svc, false
	}
	delete(d.admitted, name)
	if d.perSvc[svc]--; d.perSvc[svc] <= 0 {
		delete(d.perSvc, svc)
	}
	d.changed = true
	return svc, true
}

// ClusterDemand implements xdsserver.DemandHandler: it runs on the ADS stream goroutine, so it
// only queues the names; sync classifies them and publishes.
func (s *syncer) ClusterDemand(subscribe, unsubscribe []string) {
	s.mu.Lock()
	for _, n := range subscribe {
		s.demandOps = append(s.demandOps, demandOp{name: n, subscribe: true})
	}
	for _, n := range unsubscribe {
		s.demandOps = append(s.demandOps, demandOp{name: n})
	}
	s.mu.Unlock()
	s.signal()
}

// classify names why a name cannot be admitted ("" when it is a known Service port).
func (s *syncer) classify(name string) (k8stypes.NamespacedName, string) {
	ap, err := contract.ParseClusterName(name)
	if err != nil {
		return k8stypes.NamespacedName{}, refusedMalformed
	}
	r := s.rng.Lookup(ap)
	if r.Class != svcindex.Known {
		return k8stypes.NamespacedName{}, r.Class.String()
	}
	return r.Port.Service, ""
}

// admissible is classify under the cap: a known port that does not fit is over-cap.
func (s *syncer) admissible(name string) (k8stypes.NamespacedName, string) {
	svc, reason := s.classify(name)
	if reason == "" && len(s.demand.admitted) >= s.demand.max {
		reason = refusedOverCap
	}
	return svc, reason
}

// applyDemand updates the admitted and pending sets from the proxy's requests (ops), the names
// restored from the demand file, and index changes; every Service whose admitted names changed
// is added to dirty so this sync rebuilds it.
func (s *syncer) applyDemand(ops []demandOp, restored []string, dirty map[k8stypes.NamespacedName]struct{}) {
	d := s.demand
	for _, name := range restored {
		if _, ok := d.admitted[name]; ok {
			continue
		}
		svc, reason := s.admissible(name)
		if reason != "" {
			s.log.Info("dropping a restored on-demand cluster", "cluster", name, "reason", reason)
			continue
		}
		d.admit(name, svc)
		dirty[svc] = struct{}{}
	}
	if len(restored) > 0 {
		d.changed = len(d.admitted) != len(restored) // rewrite the file only if names were dropped
		s.log.Info("restored on-demand clusters", "file", d.file, "admitted", len(d.admitted), "dropped", len(restored)-len(d.admitted))
	}
	freed := false
	refused := refusalLog{}
	defer refused.flush(s)
	for _, op := range ops {
		if !op.subscribe {
			d.pending.remove(op.name)
			if svc, ok := d.drop(op.name); ok {
				dirty[svc] = struct{}{}
				freed = true
			}
			continue
		}
		if _, ok := d.admitted[op.name]; ok {
			continue // resent, e.g. on reconnect
		}
		svc, reason := s.admissible(op.name)
		if reason != "" {
			s.refuse(op.name, reason)
			refused.add(op.name, reason)
			continue
		}
		d.pending.remove(op.name)
		d.admit(op.name, svc)
		dirty[svc] = struct{}{}
		s.m.odAdmitted.Inc()
	}
	// Reclassify only when an answer can have changed: the index moved, or the cap freed room.
	v := s.rng.Version()
	if v == d.checked && !freed {
		return
	}
	d.checked = v
	for name, old := range d.admitted {
		svc, reason := s.classify(name)
		if reason == "" && svc == old {
			continue
		}
		d.drop(name)
		dirty[old] = struct{}{}
		if reason == "" { // the VIP changed hands: the name stays admitted, owned by the new Service
			d.admit(name, svc)
			dirty[svc] = struct{}{}
			continue
		}
		// The proxy keeps the name subscribed: admit it again once it is Known again.
		s.log.Info("on-demand cluster no longer a Service port; pending", "cluster", name, "reason", reason)
		s.addPending(name)
	}
	for _, name := range d.pending.names() {
		if len(d.admitted) >= d.max {
			break
		}
		if svc, reason := s.classify(name); reason == "" {
			d.pending.remove(name)
			d.admit(name, svc)
			dirty[svc] = struct{}{}
			s.m.odAdmitted.Inc()
			s.log.Info("pending on-demand cluster admitted", "cluster", name, "namespace", svc.Namespace, "service", svc.Name)
		}
	}
}

func (s *syncer) refuse(name, reason string) {
	s.m.odRefused.WithLabelValues(reason).Inc()
	s.log.Debug("on-demand cluster refused", "cluster", name, "reason", reason)
	if reason != refusedMalformed { // a malformed name can never become Known
		s.addPending(name)
	}
}

// refusalLog sums one sync's refusals into one log line per reason, so a scan of the Service
// range costs a few lines, not one per name (each name is logged at debug level).
type refusalLog map[string]*refusalSum

type refusalSum struct {
	n        int
	examples []string
}

const refusalExamples = 3

func (r refusalLog) add(name, reason string) {
	sum := r[reason]
	if sum == nil {
		sum = &refusalSum{}
		r[reason] = sum
	}
	sum.n++
	if len(sum.examples) < refusalExamples {
		sum.examples = append(sum.examples, name)
	}
}

func (r refusalLog) flush(s *syncer) {
	for reason, sum := range r {
		s.log.Info("on-demand cluster names refused", "reason", reason, "count", sum.n, "examples", sum.examples)
	}
}

func (s *syncer) addPending(name string) {
	if s.demand.pending.add(name) {
		s.m.odEvicted.Inc()
	}
}

// pendingSet is an insertion-ordered set that evicts its oldest name beyond max.
type pendingSet struct {
	max   int
	order *list.List
	at    map[string]*list.Element
}

func newPendingSet(max int) pendingSet {
	return pendingSet{max: max, order: list.New(), at: map[string]*list.Element{}}
}

// add remembers name (a name already present keeps its place) and reports whether the oldest
// name was evicted to make room.
func (p *pendingSet) add(name string) bool {
	if _, ok := p.at[name]; ok {
		return false
	}
	p.at[name] = p.order.PushBack(name)
	if p.order.Len() <= p.max {
		return false
	}
	oldest := p.order.Front()
	delete(p.at, oldest.Value.(string))
	p.order.Remove(oldest)
	return true
}

func (p *pendingSet) remove(name string) {
	if e, ok := p.at[name]; ok {
		p.order.Remove(e)
		delete(p.at, name)
	}
}

func (p *pendingSet) len() int { return p.order.Len() }

// names lists the pending names, oldest first (a copy: the caller may remove while iterating).
func (p *pendingSet) names() []string {
	out := make([]string, 0, p.order.Len())
	for e := p.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(string))
	}
	return out
}

// demandFile is the on-disk form of the admitted set.
type demandFile struct {
	Version  int      `json:"version"`
	Clusters []string `json:"clusters"`
}

// loadDemandFile reads the admitted names a previous run saved. A missing file is an empty
// demand; a file that does not parse is renamed to <file>.corrupt (kept for a post-mortem, out
// of the way of the next save) and the error says so.
func loadDemandFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read demand file: %w", err)
	}
	var f demandFile
	err = json.Unmarshal(b, &f)
	if err == nil && f.Version != demandFileVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, demandFileVersion)
	}
	if err != nil {
		if rerr := os.Rename(path, path+".corrupt"); rerr != nil {
			return nil, fmt.Errorf("demand file %s does not parse (%w) and could not be moved aside: %w", path, err, rerr)
		}
		return nil, fmt.Errorf("demand file %s does not parse, moved to %s.corrupt: %w", path, path, err)
	}
	return f.Clusters, nil
}

// saveDemandFile writes names atomically: a reader (or a crash) sees the old file or the new
// one, never a torn write.
func saveDemandFile(path string, names []string) (err error) {
	slices.Sort(names)
	b, err := json.Marshal(demandFile{Version: demandFileVersion, Clusters: names})
	if err != nil {
		return fmt.Errorf("encode demand file: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demand file directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("demand file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write demand file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync demand file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close demand file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace demand file: %w", err)
	}
	// The rename is durable only once the directory is synced.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// saveDemand writes the admitted set if it changed; a failure is retried after the next sync.
func (s *syncer) saveDemand() {
	d := s.demand
	if !d.changed || d.file == "" {
		return
	}
	names := make([]string, 0, len(d.admitted))
	for n := range d.admitted {
		names = append(names, n)
	}
	if err := saveDemandFile(d.file, names); err != nil {
		s.log.Error("could not save on-demand clusters; retrying after the next sync", "file", d.file, "error", err)
		return
	}
	d.changed = false
}
