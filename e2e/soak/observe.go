package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// procScript prints one line per agent or proxy process on a node
// ("proc <name> <pid> <rss kB> <threads> <fds> <socket fds>"), then the
// agent's go_goroutines and the proxy's open upstream connections. It runs on
// the node (NodeExec); with docker exec (kind) it reads while the apiserver is
// away too, and elsewhere the apiserver outage does not run (OutagePossible).
const procScript = `for n in svclb-agent svclb-nodeproxy envoy; do for p in $(pgrep -x $n); do
  echo "proc $n $p $(awk '/^VmRSS:/{r=$2} /^Threads:/{t=$2} END{print r, t}' /proc/$p/status) $(ls /proc/$p/fd | wc -l) $(ls -l /proc/$p/fd | grep -c 'socket:')"
done; done
exec 3<>/dev/tcp/127.0.0.1/%d && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && grep '^go_goroutines ' <&3
exec 4<>/dev/tcp/127.0.0.1/%d && printf 'GET /stats HTTP/1.0\r\n\r\n' >&4 && awk -F': ' '/^cluster\..*\.upstream_cx_active: /{s+=$2} END{print "upstream_cx_active", s+0}' <&4
true`

// sampleNode reads a node's agent and proxy processes.
func sampleNode(ctx context.Context, c *cluster.Cluster, node string) (Sample, error) {
	s := Sample{Time: time.Now(), Node: node}
	out, err := c.NodeExec(ctx, node, "bash", "-c", fmt.Sprintf(procScript, contract.AgentPort, contract.ProxyAdminPort))
	if err != nil {
		return s, err
	}
	return s, parseProcs(&s, out)
}

// parseProcs reads procScript's output into s.
func parseProcs(s *Sample, out string) error {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 7 && f[0] == "proc":
			var n [5]int64
			for i := range n {
				v, err := strconv.ParseInt(f[2+i], 10, 64)
				if err != nil {
					return fmt.Errorf("proc line %q: %w", sc.Text(), err)
				}
				n[i] = v
			}
			p := Proc{PID: int(n[0]), RSS: n[1] << 10, Threads: int(n[2]), FDs: int(n[3]), Sockets: int(n[4])}
			if f[1] == "svclb-agent" {
				p.Goroutines = s.Agent.Goroutines
				s.Agent = p
			} else {
				p.Upstreams = s.Proxy.Upstreams
				s.Proxy = p
			}
		case len(f) == 2 && f[0] == "upstream_cx_active":
			v, err := strconv.Atoi(f[1])
			if err != nil {
				return fmt.Errorf("upstream_cx_active %q: %w", f[1], err)
			}
			s.Proxy.Upstreams = v
		case len(f) == 2 && f[0] == "go_goroutines":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return fmt.Errorf("go_goroutines %q: %w", f[1], err)
			}
			s.Agent.Goroutines = int(v)
		}
	}
	return sc.Err()
}

// sampler samples every node every r.cfg.SampleEvery until ctx ends.
func (r *runner) sampler(ctx context.Context) {
	t := time.NewTicker(r.cfg.SampleEvery)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, n := range r.c.Nodes {
			wg.Go(func() {
				s, err := sampleNode(ctx, r.c, n.Name)
				if err != nil {
					if ctx.Err() == nil {
						r.logf("sample %s: %v", n.Name, err)
					}
					return
				}
				r.mu.Lock()
				r.rec.Samples = append(r.rec.Samples, s)
				r.mu.Unlock()
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// The capture chains' downstream connection counters: Phase 0's split.
var splitStats = []string{
	proxy.TCPStat(contract.ChainSvc, proxy.DownstreamCxTotal),
	proxy.TCPStat(contract.ChainPassthroughSvc, proxy.DownstreamCxTotal),
	proxy.TCPStat(contract.ChainPassthrough, proxy.DownstreamCxTotal),
}

// The capture chains' NC counters: connections the proxy closed for want of
// a cluster, each of which its access log carries to the agent as a refusal.
var noRouteStats = []string{
	proxy.TCPStat(contract.ChainSvc, proxy.DownstreamCxNoRoute),
	proxy.TCPStat(contract.ChainPassthroughSvc, proxy.DownstreamCxNoRoute),
	proxy.TCPStat(contract.ChainPassthrough, proxy.DownstreamCxNoRoute),
}

// statsBank sums a node proxy's split and NC counters over the load, across
// a restart of the proxy (whose counters start again from 0).
type statsBank struct {
	mu    sync.Mutex
	start map[string]map[string]int64 // node → stat → value at the last read
	total map[string]map[string]int64
}

func newStatsBank() *statsBank {
	return &statsBank{start: map[string]map[string]int64{}, total: map[string]map[string]int64{}}
}

// mark reads node's counters as the start of a stretch.
func (b *statsBank) mark(ctx context.Context, c *cluster.Cluster, node string) error {
	st, err := proxy.Stats(ctx, c, node)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.start[node] = pick(st)
	return nil
}

// bank adds what node's counters rose since mark to the totals; after a
// proxy restart the next stretch starts from 0.
func (b *statsBank) bank(ctx context.Context, c *cluster.Cluster, node string, restarting bool) error {
	st, err := proxy.Stats(ctx, c, node)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := pick(st)
	if b.total[node] == nil {
		b.total[node] = map[string]int64{}
	}
	for k, v := range now {
		b.total[node][k] += v - b.start[node][k]
	}
	if restarting {
		b.start[node] = map[string]int64{}
	} else {
		b.start[node] = now
	}
	return nil
}

func pick(st map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, k := range slices.Concat(splitStats, noRouteStats) {
		out[k] = st[k]
	}
	return out
}

// noRoutesNow is each node's proxy's NC count over the load so far, read
// now without ending the stretch.
func (b *statsBank) noRoutesNow(ctx context.Context, c *cluster.Cluster, nodes []string) (map[string]int64, error) {
	now := map[string]map[string]int64{}
	for _, n := range nodes {
		st, err := proxy.Stats(ctx, c, n)
		if err != nil {
			return nil, err
		}
		now[n] = pick(st)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int64{}
	for _, n := range nodes {
		for _, k := range noRouteStats {
			out[n] += b.total[n][k] + now[n][k] - b.start[n][k]
		}
	}
	return out, nil
}

// noRoutes is each node's proxy's NC count over the load.
func (b *statsBank) noRoutes(nodes []string) map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int64{}
	for _, n := range nodes {
		for _, k := range noRouteStats {
			out[n] += b.total[n][k]
		}
	}
	return out
}

func (b *statsBank) rows(nodes []string) []SplitRow {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []SplitRow
	for _, n := range nodes {
		t := b.total[n]
		out = append(out, SplitRow{Node: n, Svc: t[splitStats[0]], PassthroughSvc: t[splitStats[1]], Passthrough: t[splitStats[2]]})
	}
	return out
}

// snapshot measures node's proxy's xDS and its agent's on-demand counts.
func (r *runner) snapshot(ctx context.Context, when, node string) (Snapshot, error) {
	d, err := proxy.ConfigDumpWithEndpoints(ctx, r.c, node)
	if err != nil {
		return Snapshot{}, err
	}
	s, err := SnapshotOf(d)
	if err != nil {
		return s, fmt.Errorf("config dump of %s: %w", node, err)
	}
	s.When, s.Node = when, node
	b, err := r.c.NodeGet(ctx, node, contract.AgentPort, "/status")
	if err != nil {
		return s, err
	}
	st, err := agent.DecodeStatus(b)
	if err != nil {
		return s, err
	}
	s.CDS, s.Demanded, s.Pending = string(st.CDS), st.Demanded, st.Pending
	return s, nil
}

// snapshots measures every node at once and records them.
func (r *runner) snapshots(ctx context.Context, when string) {
	var wg sync.WaitGroup
	for _, n := range r.c.Nodes {
		wg.Go(func() {
			s, err := r.snapshot(ctx, when, n.Name)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.rec.Errors = append(r.rec.Errors, fmt.Sprintf("snapshot %q of %s: %v", when, n.Name, err))
				return
			}
			r.rec.Figures.Snapshots = append(r.rec.Figures.Snapshots, s)
		})
	}
	wg.Wait()
}

// clientEvents reads the load events a client pod printed since since
// (zero: all): those its earlier containers printed (banked when a fault
// stopped them), then its current container's.
func (r *runner) clientEvents(ctx context.Context, pod *corev1.Pod, since time.Time) ([]echo.LoadEvent, error) {
	var out []echo.LoadEvent
	for _, e := range r.banked[pod.Name] {
		if !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	if since.IsZero() {
		since = pod.CreationTimestamp.Add(-time.Minute)
	}
	b, err := r.c.ContainerLogs(ctx, pod.Namespace, pod.Name, workload.ClientContainer, since)
	if err != nil {
		return nil, err
	}
	evs, err := ParseEvents(b)
	return append(out, evs...), err
}

// bankPrevious keeps the load events pod's previous container printed: the
// kubelet keeps the log of one dead container only, so a fault that
// restarted a client reads it at once.
func (r *runner) bankPrevious(ctx context.Context, pod *corev1.Pod) error {
	b, err := r.c.CS.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: workload.ClientContainer, Previous: true}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s/%s's previous container %s: %w", pod.Namespace, pod.Name, workload.ClientContainer, err)
	}
	evs, err := ParseEvents(b)
	if err != nil {
		return err
	}
	r.banked[pod.Name] = append(r.banked[pod.Name], evs...)
	return nil
}

// ParseEvents reads the JSON lines of `svclb-echo load`; other lines (its
// error log) are skipped.
func ParseEvents(b []byte) ([]echo.LoadEvent, error) {
	var out []echo.LoadEvent
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e echo.LoadEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return out, fmt.Errorf("load event %.200q: %w", line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// refusals reads the refusal lines every agent logged since since and
// records those it has not recorded yet.
func (r *runner) refusals(ctx context.Context, since time.Time) error {
	ls, err := agent.RefusalLogs(ctx, r.c, since)
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, x := range r.rec.Refusals {
		seen[x.Node+x.Source+x.Time.String()] = true
	}
	for _, l := range ls {
		x := Refusal{Time: l.Time, Node: l.Node, Reason: l.Reason, Namespace: l.Namespace, Service: l.Service, Destination: l.Destination, Source: l.Source, Flag: l.Flag}
		if !seen[x.Node+x.Source+x.Time.String()] {
			r.rec.Refusals = append(r.rec.Refusals, x)
		}
	}
	return err
}
