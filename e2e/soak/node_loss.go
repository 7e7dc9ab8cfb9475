package soak

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// KindNodeLoss is a worker node lost (its container stopped) and back.
const KindNodeLoss = "node-loss"

// NodeLossBound bounds the time from `docker start` of the lost node to
// the first answered attempt of a meshed client on it, to a Service: the
// node's containerd, kubelet, CNI and DaemonSets come back, the client's
// pod gets a new sandbox, its capture's init container waits for the node
// proxy's listener, and its load starts again. Measured 24.8–32.6 s over
// five losses in three runs on a 2-core x86_64 VM (docs/soak.md, "Node
// loss"); the bound leaves close to 3× the slowest for a busier host.
const NodeLossBound = 90 * time.Second

// stepStart names the window's step at `docker start`, from which the
// recovery is measured.
const stepStart = "docker start"

// nodeLoss stops the last worker's node container, holds it stopped for
// cfg.NodeHold, starts it again, and waits until everything on it is back:
// the node Ready, its agent and proxy serving, its pods Ready (sandboxes
// recreated, so with new addresses), the guard's cuts restored, every
// proxy programmed, and every client on it answered again on every target.
type nodeLoss struct{}

func (nodeLoss) Name() string { return KindNodeLoss }

func (nodeLoss) Describe() string {
	return "a worker node is lost (its container stopped) and comes back"
}

// lostNode is the worker the fault stops: the last, so that the scan pod
// and the node proxy's restart (the first worker's) stay on the other one.
func lostNode(workers []string) string {
	if len(workers) == 0 {
		return ""
	}
	return workers[len(workers)-1]
}

func (nodeLoss) Windows(l Layout) []Window {
	n := lostNode(l.Workers)
	if n == "" {
		return nil
	}
	return []Window{{Name: "worker " + n + " lost and back", Node: n}}
}

// Prepare makes the direct target (a steady backend's pod address) one
// that does not run on the lost node: the node's sandboxes are recreated
// when it comes back, so its pods' addresses change, and the load dials
// the direct target by address for the whole run.
func (nodeLoss) Prepare(ctx context.Context, r *runner) error {
	node := lostNode(cluster.NodeNames(r.c.Workers()))
	pods, err := backendPods(ctx, r.c, TargetSteady)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != node && p.Status.PodIP != "" {
			r.wl.direct = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(workload.EchoPort))
			return nil
		}
	}
	return fmt.Errorf("every %s backend runs on %s, which the node loss stops: the direct target would go with it", TargetSteady, node)
}

// Stops: the load of the clients on the lost node stops with it and starts
// again with a new container.
func (nodeLoss) Stops(w Window, c Client) bool { return c.Node == w.Node }

// Fails: anything from a client on the lost node. From a client on another
// node, only a connection whose endpoint was on the lost node: one a lost
// backend answered (then cut), or one closed before any backend answered
// that started while the client's node proxy still held one of the
// target's lost endpoints (Drained). The proxy picks the endpoint; it logs
// no refusal for a failed upstream connection, so which one it picked is
// known by the time alone.
func (nodeLoss) Fails(_ *Record, w Window, c Client, e echo.LoadEvent) (bool, string) {
	if c.Node == w.Node {
		return true, "its node " + w.Node + " was lost"
	}
	lost := w.Lost[e.Target]
	if len(lost) == 0 {
		return false, "no backend of " + e.Target + " ran on the lost node " + w.Node
	}
	if e.Pod != "" {
		if slices.Contains(lost, e.Pod) {
			return true, "answered by " + e.Pod + ", which ran on the lost node " + w.Node
		}
		return false, "answered by " + e.Pod + ", which did not run on the lost node " + w.Node
	}
	drained, ok := w.Drained[c.Node+" "+e.Target]
	if !ok {
		return false, "closed before any backend answered, and the proxy on " + c.Node + " was not seen to drop " + e.Target + "'s endpoints on " + w.Node
	}
	if e.Time.After(drained) {
		return false, fmt.Sprintf("closed before any backend answered, %.1f s after the proxy on %s held no endpoint of %s on %s any more",
			e.Time.Sub(drained).Seconds(), c.Node, e.Target, w.Node)
	}
	return true, "closed before any backend answered while the proxy on " + c.Node + " still held " + e.Target + "'s endpoints on the lost node " + w.Node
}

func (nodeLoss) Cuts(_ *Record, w Window, c Client, e echo.LoadEvent) (bool, string) {
	switch {
	case c.Node == w.Node:
		return true, "its node " + w.Node + " was lost"
	case slices.Contains(w.Lost[e.Target], e.Pod):
		return true, "its backend " + e.Pod + " ran on the lost node " + w.Node
	}
	return false, "its backend " + e.Pod + " did not run on the lost node " + w.Node
}

// NodeRecovery is one client's way back after a node loss.
type NodeRecovery struct {
	Window, Node, Client string
	// Down is how long the node was gone (`docker stop` → `docker start`).
	Down time.Duration
	// Answered is `docker start` → the end of the second in which the
	// client's first answered attempt to a Service started (0: none).
	Answered time.Duration
	Bound    time.Duration
}

// Analyze measures, from the record, each client on the lost node: from
// `docker start` to its first answered attempt to a Service, which must
// keep NodeLossBound.
func (nodeLoss) Analyze(r *Record, w Window) []Bound {
	var start, stop time.Time
	for _, s := range w.Steps {
		switch s.Name {
		case stepStart:
			start = s.At
		case "docker stop":
			stop = s.At
		}
	}
	if start.IsZero() {
		return nil // the fault failed before it started the node: its error says so
	}
	var out []Bound
	for _, c := range r.Clients {
		if c.Node != w.Node {
			continue
		}
		rc := NodeRecovery{Window: w.Name, Node: w.Node, Client: c.Pod, Down: start.Sub(stop), Bound: NodeLossBound}
		for _, e := range c.Events {
			if e.Kind == echo.LoadSecond && e.OK > 0 && e.Target != TargetDirect && e.Second >= start.Unix() {
				rc.Answered = time.Unix(e.Second+1, 0).Sub(start)
				break
			}
		}
		r.Figures.NodeLosses = append(r.Figures.NodeLosses, rc)
		b := Bound{What: "node loss: " + c.Pod + " answered again after " + w.Name, OK: rc.Answered > 0 && rc.Answered <= NodeLossBound}
		if rc.Answered > 0 {
			b.Detail = fmt.Sprintf("first answered attempt to a Service %.0f s after docker start (by the end of its second); bound %s", rc.Answered.Seconds(), NodeLossBound)
		} else {
			b.Detail = "no answered attempt to a Service after docker start"
		}
		out = append(out, b)
	}
	return out
}

// Needs: the loss stops the node's Docker container, so every node must be one of the local
// Docker engine, whatever the node access.
func (nodeLoss) Needs(c *cluster.Cluster) error {
	if err := c.NodesInDocker(); err != nil {
		return fmt.Errorf("%w: %w", faults.ErrNotDocker, err)
	}
	return nil
}

func (nodeLoss) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	node := w.Node
	// What the loss takes: the backends on the node, by target.
	lost := map[string][]string{}
	addrs := map[string][]string{} // target → the lost backends' endpoints
	for _, b := range backends {
		pods, err := r.livePods(ctx, b.name)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.Spec.NodeName == node {
				lost[b.name] = append(lost[b.name], p.Name)
				addrs[b.name] = append(addrs[b.name], net.JoinHostPort(p.Status.PodIP, strconv.Itoa(workload.EchoPort)))
				if net.JoinHostPort(p.Status.PodIP, strconv.Itoa(workload.EchoPort)) == r.wl.direct {
					lost[TargetDirect] = []string{p.Name}
				}
			}
		}
	}
	w.Lost = lost
	var clients []*corev1.Pod
	restarts := map[string]int32{}
	for i := range r.wl.clients {
		if p := &r.wl.clients[i]; p.Spec.NodeName == node {
			clients = append(clients, p)
			restarts[p.Name] = appRestarts(p)
		}
	}
	// The node's agent and proxy start again with it: what the agent
	// logged and the proxy counted so far is read now.
	if err := r.refusals(ctx, r.rec.LoadStart); err != nil {
		return err
	}
	if err := r.stats.bank(ctx, r.c, node, true); err != nil {
		return err
	}
	// Watch the other workers' proxies drop the lost endpoints, from the
	// stop to the end of the window.
	d := newDrainWatch(r, node, addrs)
	dctx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { d.watch(dctx) })
	defer func() {
		stopWatch()
		watching.Wait()
	}()

	loss, err := faults.LoseNode(ctx, r.c, node, r.cfg.NodeHold, 5*time.Minute)
	if !loss.Stop.IsZero() {
		w.Start = loss.Stop
	}
	for _, s := range []Step{{"docker stop", loss.Stop}, {"stopped", loss.Stopped}, {stepStart, loss.Start}, {"started", loss.Started}, {"node Ready (new kubelet)", loss.Ready}} {
		if !s.At.IsZero() {
			w.Steps = append(w.Steps, s)
		}
	}
	if err != nil {
		return err
	}
	if loss.IPAfter != loss.IPBefore {
		w.notef("node address changed: %s → %s", loss.IPBefore, loss.IPAfter)
	}
	if err := waitNodeServes(ctx, r.c, node); err != nil {
		return err
	}
	w.step("agent serving /status, proxy /ready")
	// The clients on the node: the same pods, their sandboxes and
	// containers new.
	for _, p := range clients {
		np, err := waitRestarted(ctx, r.c, p, restarts[p.Name])
		if err != nil {
			return err
		}
		*p = *np
		w.step(p.Name + " Ready again")
		if err := r.bankPrevious(ctx, p); err != nil {
			return err
		}
	}
	var answered time.Duration
	for _, p := range clients {
		t, err := r.waitAnswered(ctx, p, loss.Start)
		if err != nil {
			return err
		}
		w.Steps = append(w.Steps, Step{p.Name + " answered (its second)", t})
		answered = max(answered, t.Sub(loss.Start))
	}
	if err := nodePodsRunning(ctx, r.c, r.rec.Env.NotReadyBefore); err != nil {
		return err
	}
	if err := r.soakPodsReady(ctx); err != nil {
		return err
	}
	w.step("every node and soak pod Ready")
	if scan, err := r.c.CS.CoreV1().Pods(Namespace).Get(ctx, r.wl.scan.Name, metav1.GetOptions{}); err == nil {
		r.wl.scan = scan
	} else {
		return fmt.Errorf("find the scan pod again: %w", err)
	}
	// kube-proxy on the node started again and restored what the guard
	// had cut; the guard there, started again too, cuts it.
	if err := waitCutAll(ctx, r.c, r.soakServices(), 2*time.Minute); err != nil {
		return err
	}
	w.step("the guard cut every soak Service again")
	var dialled []measure.Dialled
	for _, b := range backends {
		dialled = append(dialled, measure.ServicePort(r.wl.services[b.name], 80))
	}
	if _, err := measure.WaitProgrammed(ctx, r.c, dialled); err != nil {
		return err
	}
	w.step("every node's proxy programmed")
	for _, p := range clients {
		if err := r.waitReachedAll(ctx, p, loss.Start); err != nil {
			return err
		}
	}
	w.step("every client on " + node + " answered on every target")
	drained, err := d.wait(ctx)
	w.Drained = drained
	if err != nil {
		return err
	}
	var late time.Duration
	for _, t := range drained {
		late = max(late, t.Sub(loss.Stop))
	}
	w.notef("down %s (held %s after the stop returned); node Ready %s after docker start, a client there answered within %.0f s; the other proxies held none of its dead endpoints %.1f s after the stop at the latest (%d came back at their old address); lost backends %v",
		loss.Down().Round(100*time.Millisecond), r.cfg.NodeHold, loss.Ready.Sub(loss.Start).Round(100*time.Millisecond), answered.Seconds(), late.Seconds(), d.backCount, formatLost(lost))
	return nil
}

func formatLost(lost map[string][]string) string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(lost)) {
		out = append(out, fmt.Sprintf("%s %d", t, len(lost[t])))
	}
	return strings.Join(out, ", ")
}

// appRestarts is the restart count of a client pod's load container.
func appRestarts(p *corev1.Pod) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == workload.ClientContainer {
			return s.RestartCount
		}
	}
	return 0
}

// waitNodeServes waits until node's agent answers /status with a snapshot
// and its proxy's admin /ready answers.
func waitNodeServes(ctx context.Context, c *cluster.Cluster, node string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := c.NodeGet(ctx, node, contract.AgentPort, "/status")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		st, err := agent.DecodeStatus(b)
		if err != nil || st.SnapshotVersion == 0 {
			last = fmt.Sprintf("agent /status: no snapshot yet (%v)", err)
			return false, nil
		}
		if _, err := c.NodeGet(ctx, node, contract.ProxyAdminPort, "/ready"); err != nil {
			last = err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("agent and proxy on %s: %w (%s)", node, err, last)
	}
	return nil
}

// waitRestarted waits until pod p's load container was restarted (its
// restart count past before) and the pod is Ready, and returns it.
func waitRestarted(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, before int32) (*corev1.Pod, error) {
	var got *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		np, err := c.CS.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got = np
		last = fmt.Sprintf("restarts %d (before %d), %s", appRestarts(np), before, cluster.PodState(np))
		return np.UID == p.UID && appRestarts(np) > before && cluster.PodReady(np), nil
	})
	if err != nil {
		return nil, fmt.Errorf("client %s after the node loss: %w (%s)", p.Name, err, last)
	}
	return got, nil
}

// waitAnswered waits until client p counted an answered attempt to a
// Service in a second from since on, and returns the end of that second.
func (r *runner) waitAnswered(ctx context.Context, p *corev1.Pod, since time.Time) (time.Time, error) {
	var at time.Time
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := r.clientEvents(ctx, p, since)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, e := range evs {
			if e.Kind == echo.LoadSecond && e.OK > 0 && e.Target != TargetDirect && e.Second >= since.Unix() {
				at = time.Unix(e.Second+1, 0)
				return true, nil
			}
		}
		last = "no answered attempt yet"
		return false, nil
	})
	if err != nil {
		return at, fmt.Errorf("client %s after the node loss: %w (%s)", p.Name, err, last)
	}
	return at, nil
}

// waitReachedAll waits until client p, since since, succeeded on every
// target after its last failure there.
func (r *runner) waitReachedAll(ctx context.Context, p *corev1.Pod, since time.Time) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := r.clientEvents(ctx, p, since)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		lastFail, lastOK := map[string]time.Time{}, map[string]time.Time{}
		for _, e := range evs {
			switch {
			case e.Kind == echo.LoadFail:
				lastFail[e.Target] = e.Time
			case e.Kind == echo.LoadSecond && e.OK > 0 && e.Second >= since.Unix():
				lastOK[e.Target] = time.Unix(e.Second, 0)
			}
		}
		for _, t := range targets() {
			if ok := lastOK[t]; ok.IsZero() || !ok.After(lastFail[t]) {
				last = fmt.Sprintf("no success on %s after its last failure", t)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("client %s after the node loss: %w (%s)", p.Name, err, last)
	}
	return nil
}

// soakPodsReady waits until every pod of the soak's namespace is Running
// and Ready.
func (r *runner) soakPodsReady(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := r.c.CS.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && (p.Status.Phase != corev1.PodRunning || !cluster.PodReady(&p)) {
				last = p.Name + " " + cluster.PodState(&p)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pods of %s not all Ready: %w (%s)", Namespace, err, last)
	}
	return nil
}

// soakServices are every guarded Service the soak made.
func (r *runner) soakServices() []*corev1.Service {
	var out []*corev1.Service
	for _, b := range backends {
		out = append(out, r.wl.services[b.name])
	}
	for _, fc := range r.wl.firstConn {
		out = append(out, fc...)
	}
	return out
}

// drainWatch follows, on every other worker's proxy, each target's lost
// endpoints until the proxy holds none that is dead: from then on (and held
// none since) an attempt there cannot have gone to the lost node's old
// sandboxes. A lost address the proxy still holds is not dead when a pod of
// the same target serves it again: Ready, its container started after the
// stop. A loss shorter than the node-monitor grace period leaves the lost
// pods Ready in the API, so their endpoints may never leave the slices, and
// the node's IPAM may hand each pod its old address back; the proxy then
// holds the lost address throughout and is right to.
type drainWatch struct {
	r       *runner
	others  []string
	addrs   map[string][]string // target → lost endpoints
	cluster map[string]string   // target → its svc: cluster
	since   time.Time           // the stop, or just before it
	mu      sync.Mutex
	drain   drainState
	last    string
	// backCount is, once wait returned, how many lost endpoints came back
	// at their old address while a proxy held them.
	backCount int
}

func newDrainWatch(r *runner, node string, addrs map[string][]string) *drainWatch {
	d := &drainWatch{r: r, addrs: addrs, cluster: map[string]string{}, since: time.Now(), drain: drainState{drained: map[string]time.Time{}}}
	for _, n := range r.c.Workers() {
		if n.Name != node {
			d.others = append(d.others, n.Name)
		}
	}
	for t := range addrs {
		if vip, err := netip.ParseAddr(r.wl.services[t].Spec.ClusterIP); err == nil {
			d.cluster[t] = contract.ClusterName(vip, 80)
		}
	}
	return d
}

func (d *drainWatch) watch(ctx context.Context) {
	for ctx.Err() == nil {
		for _, n := range d.others {
			eps, err := proxy.Endpoints(ctx, d.r.c, n)
			if err != nil {
				d.setLast(err.Error())
				continue
			}
			// The pods are read after the proxy: an address the proxy held
			// before its pod was Ready again is judged by the later state,
			// which can only make a sample count as drained that a moment
			// earlier was not, and the next sample reads it again.
			for t, lost := range d.addrs {
				revived, err := d.revived(ctx, t)
				if err != nil {
					d.setLast(err.Error())
					continue
				}
				d.mu.Lock()
				if dead := d.drain.observe(time.Now(), n+" "+t, eps[d.cluster[t]], lost, revived); len(dead) > 0 {
					d.last = fmt.Sprintf("the proxy on %s holds lost endpoints of %s that no pod serves again: %v", n, t, dead)
				}
				d.mu.Unlock()
			}
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

func (d *drainWatch) setLast(s string) {
	d.mu.Lock()
	d.last = s
	d.mu.Unlock()
}

// revived are target's endpoints served again since the stop: a pod of the
// target, Ready, whose echo container started after it.
func (d *drainWatch) revived(ctx context.Context, target string) (map[string]bool, error) {
	pods, err := d.r.livePods(ctx, target)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Status.PodIP == "" || !cluster.PodReady(p) || !startedAfter(p, d.since) {
			continue
		}
		out[net.JoinHostPort(p.Status.PodIP, strconv.Itoa(workload.EchoPort))] = true
	}
	return out, nil
}

// startedAfter: every container of p is running and started after t.
func startedAfter(p *corev1.Pod, t time.Time) bool {
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil || !s.State.Running.StartedAt.After(t) {
			return false
		}
	}
	return true
}

// drainState is the drain watch's bookkeeping, by "<node> <target>": from
// when that proxy held no dead lost endpoint, and held none since.
type drainState struct {
	drained map[string]time.Time
	// back are the lost endpoints a proxy held while a pod served them
	// again: those that came back at their old address.
	back map[string]bool
}

// observe takes one sample of what a proxy held for a target and returns
// the dead lost endpoints it held (none: drained, from now or earlier).
func (s *drainState) observe(now time.Time, key string, held []netip.AddrPort, lost []string, revived map[string]bool) []string {
	var dead []string
	for _, a := range held {
		switch {
		case !slices.Contains(lost, a.String()):
		case revived[a.String()]:
			if s.back == nil {
				s.back = map[string]bool{}
			}
			s.back[a.String()] = true
		default:
			dead = append(dead, a.String())
		}
	}
	if len(dead) > 0 {
		delete(s.drained, key)
		return dead
	}
	if _, seen := s.drained[key]; !seen {
		s.drained[key] = now
	}
	return nil
}

// wait waits until every other worker's proxy holds no dead lost endpoint
// and returns from when each did.
func (d *drainWatch) wait(ctx context.Context) (map[string]time.Time, error) {
	defer func() {
		d.mu.Lock()
		d.backCount = len(d.drain.back)
		d.mu.Unlock()
	}()
	want := len(d.others) * len(d.addrs)
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.drain.drained) == want, nil
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	out := maps.Clone(d.drain.drained)
	if err != nil {
		return out, fmt.Errorf("the other workers' proxies still hold dead endpoints of the lost node: %w (%s)", err, d.last)
	}
	return out, nil
}
