package measure

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/proxy"
)

// CountersSettle bounds the wait, after a run's last attempt, for every
// node's counters to account for it. The proxy counts a connection when it
// accepts it and a refusal before it closes; its access log reaches the
// agent within a flush (Envoy's default buffer_flush_interval is 1 s,
// api/envoy/extensions/access_loggers/grpc/v3/als.proto). The wait ends as
// soon as they agree (buildChecks' inputs are then final); a loaded machine
// gets the rest.
const CountersSettle = 20 * time.Second

// Probe gathers a leg's evidence around each of its runs: what every
// node's proxy and agent counted (Start, then Finish: the run's Checks and
// Refusals) and what kube-proxy held of the leg's cut Services (its Cuts).
// One run at a time.
type Probe struct {
	c       *cluster.Cluster
	dialled []Dialled
	nodes   []string

	started time.Time
	before  map[string]counters
	banked  map[string]counters
	cut     cutState
}

// counters is one node's readings: the node DaemonSet pod they come from
// (a new pod counts from 0 again), the proxy's /stats and the agent's
// refusals.
type counters struct {
	pod     string
	stats   map[string]int64
	refused map[refusedSeries]float64
}

// NewProbe is the probe of a leg that dials dialled.
func NewProbe(c *cluster.Cluster, dialled []Dialled) *Probe {
	return &Probe{c: c, dialled: dialled, nodes: cluster.NodeNames(c.Nodes)}
}

// Dialled is what the probe gathers evidence for.
func (p *Probe) Dialled() []Dialled { return p.dialled }

// Start reads every node's counters and kube-proxy's state of the cut
// Services right before a run.
func (p *Probe) Start(ctx context.Context) error {
	p.started, p.banked = time.Now(), map[string]counters{}
	if len(p.dialled) == 0 {
		return nil
	}
	var counterErr, cutErr error
	var wg sync.WaitGroup
	wg.Go(func() { p.before, counterErr = p.read(ctx) })
	wg.Go(func() { p.cut, cutErr = readCut(ctx, p.c, p.dialled) })
	wg.Wait()
	if counterErr != nil {
		return fmt.Errorf("counters before the run: %w", counterErr)
	}
	if cutErr != nil {
		return fmt.Errorf("kube-proxy state before the run: %w", cutErr)
	}
	return nil
}

// BeforeRestart banks node's counters: a leg that restarts the node
// DaemonSet's pod on node (its proxy and agent count from 0 again) calls
// it right before, so the run's rise is what the old pod counted until
// then plus what the new one counted since.
func (p *Probe) BeforeRestart(ctx context.Context, node string) error {
	if len(p.dialled) == 0 {
		return nil
	}
	c, err := p.readNode(ctx, node)
	if err != nil {
		return fmt.Errorf("banking the counters of %s: %w", node, err)
	}
	p.banked[node] = c
	return nil
}

// Finish waits until every node's counters account for the run's attempts,
// then records the run's Checks, Refusals and Cuts and applies the checks
// (evidence.Run ApplyChecks). An error means the evidence could not be
// read; the run cannot be judged.
func (p *Probe) Finish(ctx context.Context, run *evidence.Run) error {
	if len(p.dialled) == 0 {
		return nil
	}
	deltas, note, err := p.settle(ctx, run)
	if err != nil {
		return err
	}
	if note != "" {
		run.Notes = append(run.Notes, note)
	}
	var records []evidence.Refusal
	var after cutState
	var logErr, cutErr error
	var wg sync.WaitGroup
	if slices.ContainsFunc(p.dialled, func(d Dialled) bool { return d.Reason != "" }) {
		wg.Go(func() { records, logErr = ReadRefusals(ctx, p.c, p.started) })
	}
	wg.Go(func() { after, cutErr = readCut(ctx, p.c, p.dialled) })
	wg.Wait()
	if logErr != nil {
		return logErr
	}
	if cutErr != nil {
		return fmt.Errorf("kube-proxy state after the run: %w", cutErr)
	}
	run.Cuts = p.cut.cuts(after, p.dialled)
	run.Checks = buildChecks(p.nodes, run, p.dialled, deltas, records)
	run.Refusals = firstRecords(p.dialled, records)
	run.ApplyChecks()
	return nil
}

// settle reads every node's counters until they account for the run: on
// every client node the capture's chains counted at least the attempts
// made from it, and the agent counted at least every refusal the proxy
// made, each of which the proxy reports over its access log: the NC ones
// (tcp.cap_svc downstream_cx_no_route) and, in green, the attempts to a
// target green expects refused that the client saw the proxy close. Not a
// cluster's upstream_cx_none_healthy: Envoy's tcp_proxy picks the host
// itself (source/common/tcp_proxy/tcp_proxy.cc Filter::maybeTunnel,
// cluster.chooseHost) and, finding none, sets UH without counting it (the
// counter is the cluster manager's, counted only when its pool lookup picks
// the host, ClusterEntry::tcpConnPoolImpl), so real Envoy need not serve it. Both hold at once where nothing was refused (a red run), and
// otherwise as soon as the agent caught up: the proxy counts a refusal
// before it closes the connection, and flushes its log within
// buffer_flush_interval (1 s, Envoy's default). After CountersSettle it
// returns the last readings with a note saying what had not settled.
func (p *Probe) settle(ctx context.Context, run *evidence.Run) (map[string]nodeDelta, string, error) {
	var deltas map[string]nodeDelta
	var readErr, fatal error
	last := ""
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, CountersSettle, true, func(ctx context.Context) (bool, error) {
		after, err := p.read(ctx)
		if err != nil {
			readErr = err
			return false, nil
		}
		d, err := p.deltas(after)
		if err != nil {
			fatal = err // a restart nobody banked: waiting cannot help
			return false, err
		}
		deltas, readErr, last = d, nil, p.unsettled(run, d)
		return last == "", nil
	})
	switch {
	case fatal != nil:
		return nil, "", fatal
	case deltas == nil && readErr != nil:
		return nil, "", fmt.Errorf("counters after the run: %w", readErr)
	case deltas == nil:
		return nil, "", fmt.Errorf("counters after the run: none read in %s", CountersSettle)
	case last != "":
		return deltas, fmt.Sprintf("counters not settled after %s: %s", CountersSettle, last), nil
	}
	return deltas, "", nil
}

// unsettled says which node's counters do not account for the run yet ("" when all do).
func (p *Probe) unsettled(run *evidence.Run, deltas map[string]nodeDelta) string {
	var why []string
	outside, inside := split(p.dialled)
	for _, n := range p.nodes {
		d := deltas[n]
		attempts := 0
		if ranged := append(kept(p.dialled), inside...); len(ranged) > 0 { // FromNode without destinations counts them all
			attempts = run.FromNode(n, tos(ranged)...).Attempts
		}
		if seen := d.stats[statSvcCx] + d.stats[statPassSvcCx]; seen < int64(attempts) {
			why = append(why, fmt.Sprintf("%s: the capture's Service-range chains saw %d of %d attempts", n, seen, attempts))
		}
		if attempts := run.FromNode(n, tos(outside)...).Attempts; len(outside) > 0 && d.stats[statPassCx] < int64(attempts) {
			why = append(why, fmt.Sprintf("%s: the capture's passthrough chain saw %d of %d attempts", n, d.stats[statPassCx], attempts))
		}
		refused := d.stats[statSvcNoRoute]
		if expected := refusedTargets(p.dialled); run.Mode == evidence.Green && len(expected) > 0 {
			refused = max(refused, int64(run.FromNode(n, expected...).ProxyClosed))
		}
		if got := d.refusedTotal(); got < float64(refused) {
			why = append(why, fmt.Sprintf("%s: the agent counted %g of the %d connections the proxy refused", n, got, refused))
		}
	}
	return strings.Join(why, "; ")
}

// refusedTargets are the addresses of the targets green expects refused.
func refusedTargets(ds []Dialled) []string {
	var out []string
	for _, d := range ds {
		if d.Reason != "" {
			out = append(out, d.To)
		}
	}
	return out
}

// deltas is every node's rise since Start. A node whose pod changed counts
// from its banked readings (BeforeRestart) and then from 0; without them
// its rise is unknown.
func (p *Probe) deltas(after map[string]counters) (map[string]nodeDelta, error) {
	out := map[string]nodeDelta{}
	for _, n := range p.nodes {
		b, a := p.before[n], after[n]
		if a.pod == b.pod {
			out[n] = sub(a, b)
			continue
		}
		banked, ok := p.banked[n]
		if !ok || banked.pod != b.pod {
			return nil, fmt.Errorf("the node pod on %s changed during the run (%s → %s) and its counters were not banked before (Probe.BeforeRestart): their rise is unknown", n, b.pod, a.pod)
		}
		out[n] = add(sub(banked, b), sub(a, counters{}))
	}
	return out, nil
}

func sub(a, b counters) nodeDelta {
	d := nodeDelta{stats: map[string]int64{}, refused: map[refusedSeries]float64{}}
	for k, v := range a.stats {
		if v -= b.stats[k]; v != 0 {
			d.stats[k] = v
		}
	}
	for k, v := range a.refused {
		if v -= b.refused[k]; v != 0 {
			d.refused[k] = v
		}
	}
	return d
}

func add(a, b nodeDelta) nodeDelta {
	d := nodeDelta{stats: maps.Clone(a.stats), refused: maps.Clone(a.refused)}
	for k, v := range b.stats {
		d.stats[k] += v
	}
	for k, v := range b.refused {
		d.refused[k] += v
	}
	return d
}

// read reads every node's counters, the nodes at once.
func (p *Probe) read(ctx context.Context) (map[string]counters, error) {
	out := make(map[string]counters, len(p.nodes))
	var mu sync.Mutex
	err := concurrently(p.nodes, func(n string) error {
		c, err := p.readNode(ctx, n)
		mu.Lock()
		out[n] = c
		mu.Unlock()
		return err
	})
	return out, err
}

func (p *Probe) readNode(ctx context.Context, node string) (counters, error) {
	pod, err := agent.PodOn(ctx, p.c, node)
	if err != nil {
		return counters{}, err
	}
	stats, err := proxy.Stats(ctx, p.c, node)
	if err != nil {
		return counters{}, err
	}
	m, err := agent.Metrics(ctx, p.c, pod)
	if err != nil {
		return counters{}, err
	}
	refused := map[refusedSeries]float64{}
	for _, x := range m[agent.RefusedMetric].GetMetric() {
		var s refusedSeries
		for _, l := range x.GetLabel() {
			switch l.GetName() {
			case "reason":
				s.reason = l.GetValue()
			case "namespace":
				s.namespace = l.GetValue()
			case "service":
				s.service = l.GetValue()
			}
		}
		refused[s] += x.GetCounter().GetValue()
	}
	return counters{pod: pod, stats: stats, refused: refused}, nil
}

// concurrently runs f for every item (a node, a pod) at once: each read
// costs a docker exec or an apiserver round trip, slow on a loaded machine.
func concurrently(items []string, f func(item string) error) error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { errs[i] = f(it) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CapturedConnections is how many connections the capture listeners of
// node's proxy have accepted into their Service-range chains (cap_svc and
// cap_passthrough_svc, whichever the Phase flags use): a rise is the proxy's
// word that a client's attempt reached it.
func CapturedConnections(ctx context.Context, c *cluster.Cluster, node string) (int64, error) {
	st, err := proxy.Stats(ctx, c, node)
	if err != nil {
		return 0, err
	}
	return st[statSvcCx] + st[statPassSvcCx], nil
}
