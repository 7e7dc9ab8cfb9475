package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/kubeproxyguard"
)

// pollCost is about what one read of a pod netns' sockets through the
// node container takes on a loaded 2-core host: the resolution of the
// listener watch.
const pollCost = 100 * time.Millisecond

// schedule runs the selected faults one after the other, a gap apart, in
// cycles until the load's duration is used up (at least one cycle).
func (r *runner) schedule(ctx context.Context) {
	r.logf("load running; quiet lead-in %s", leadIn)
	if !sleepCtx(ctx, leadIn) || len(r.cfg.Faults) == 0 {
		return
	}
	stop := r.rec.LoadStart.Add(r.cfg.Duration - tail)
	for cycle := 0; ctx.Err() == nil; cycle++ {
		for _, kind := range r.cfg.Faults {
			r.fault(ctx, kind, cycle)
			if !sleepCtx(ctx, r.cfg.Gap) {
				return
			}
		}
		if time.Now().After(stop) {
			return
		}
	}
}

// fault runs one kind of fault; node faults run once per node, in turn.
func (r *runner) fault(ctx context.Context, kind string, cycle int) {
	suffix := ""
	if cycle > 0 {
		suffix = fmt.Sprintf(" #%d", cycle+1)
	}
	switch kind {
	case KindRolling:
		r.window(ctx, "rolling restart of "+TargetRoll+suffix, kind, r.rolling)
	case KindScale:
		r.window(ctx, "scale "+TargetScale+" to 0 and back"+suffix, kind, r.scale)
		r.readRefusals(ctx)
	case KindKubeProxy:
		for _, n := range r.c.Nodes {
			r.window(ctx, "kube-proxy restart on "+n.Name+suffix, kind, func(ctx context.Context, w *Window) error { return r.kubeProxy(ctx, w, n.Name) })
		}
	case KindAgent:
		for _, n := range r.c.Workers() {
			r.window(ctx, "agent restart on "+n.Name+suffix, kind, func(ctx context.Context, w *Window) error { return r.agentRestart(ctx, w, n.Name) })
		}
	case KindProxy:
		node := r.c.Workers()[0].Name
		r.window(ctx, "node proxy restart on "+node+suffix, kind, func(ctx context.Context, w *Window) error { return r.proxyRestart(ctx, w, node) })
	case KindAPIServer:
		r.window(ctx, "apiserver away"+suffix, kind, r.apiserver)
		// The controllers lost their leases while it was away and restart;
		// the next fault needs them.
		if err := nodePodsRunning(ctx, r.c, r.rec.Env.NotReadyBefore); err != nil {
			r.addError("after the apiserver outage: %v", err)
		}
	case KindRecreate:
		r.window(ctx, "Service "+TargetRecreate+" deleted and recreated"+suffix, kind, r.recreate)
		r.readRefusals(ctx)
	case KindScan:
		r.window(ctx, "scan of the Service range"+suffix, kind, r.scan)
	case KindFirstConn:
		r.window(ctx, "first connections in on-demand mode"+suffix, kind, func(ctx context.Context, w *Window) error { return r.firstConn(ctx, w, cycle) })
	}
}

// window runs f as window name: Start before it, End when it returns
// (unless f set it), its error recorded.
func (r *runner) window(ctx context.Context, name, kind string, f func(context.Context, *Window) error) {
	w := &Window{Name: name, Kind: kind, Start: time.Now()}
	r.logf("fault: %s", name)
	err := f(ctx, w)
	if w.End.IsZero() {
		w.End = time.Now()
	}
	if err != nil {
		w.Error = err.Error()
		r.logf("fault: %s FAILED after %s: %v", name, w.End.Sub(w.Start).Round(100*time.Millisecond), err)
	} else {
		r.logf("fault: %s: %s; %s", name, w.End.Sub(w.Start).Round(100*time.Millisecond), strings.Join(w.Notes, "; "))
	}
	r.mu.Lock()
	r.rec.Windows = append(r.rec.Windows, *w)
	r.mu.Unlock()
}

func (w *Window) step(name string) { w.Steps = append(w.Steps, Step{Name: name, At: time.Now()}) }

func (w *Window) notef(format string, args ...any) {
	w.Notes = append(w.Notes, fmt.Sprintf(format, args...))
}

func (r *runner) addError(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Errors = append(r.rec.Errors, fmt.Sprintf(format, args...))
}

// refusalsWithin bounds readRefusals' wait for the agents' logs to catch
// up with the proxies: Envoy flushes its access log every second.
const refusalsWithin = 15 * time.Second

// readRefusals records the refusals the agents logged since the load
// started, once every node's agent has logged as many NC refusals as its
// proxy counted NC closes: the proxy sends its access log in batches, so a
// refusal reaches the agent's log a moment after the client saw it. If they
// do not catch up within refusalsWithin it reads what is there and logs the
// shortfall; the figures' unlogged column shows it at the end.
func (r *runner) readRefusals(ctx context.Context) {
	since := r.rec.LoadStart
	nodes := cluster.NodeNames(r.c.Nodes)
	t0 := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, refusalsWithin, true, func(ctx context.Context) (bool, error) {
		nc, err := r.stats.noRoutesNow(ctx, r.c, nodes)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if err := r.refusals(ctx, since); err != nil {
			last = err.Error()
			return false, nil
		}
		r.mu.Lock()
		logged := loggedNC(r.rec.Refusals, since)
		r.mu.Unlock()
		for _, n := range nodes {
			if logged[n] < nc[n] {
				last = fmt.Sprintf("%s: %d of %d NC closes logged", n, logged[n], nc[n])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		r.logf("refusal logs not caught up after %s: %s", refusalsWithin, last)
		if rerr := r.refusals(ctx, since); rerr != nil {
			r.addError("reading the agents' refusal logs: %v", rerr)
		}
		return
	}
	r.logf("refusal logs caught up with the proxies' NC closes in %s", time.Since(t0).Round(100*time.Millisecond))
}

// rolling restarts the roll Deployment (a new pod template) and waits until
// the rollout is complete, the old pods are gone and every worker's proxy
// balances over the new pods only.
func (r *runner) rolling(ctx context.Context, w *Window) error {
	w.Target = TargetRoll
	old, err := r.livePods(ctx, TargetRoll)
	if err != nil {
		return err
	}
	w.Pods = podNames(old)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"svclb.dev/soak-restart":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	w.Start = time.Now()
	if _, err := r.c.CS.AppsV1().Deployments(Namespace).Patch(ctx, TargetRoll, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("restart deployment %s: %w", TargetRoll, err)
	}
	w.step("template changed")
	if err := r.waitReplaced(ctx, w, TargetRoll, 3, old); err != nil {
		return err
	}
	w.notef("%d backends replaced one by one (maxSurge 1, maxUnavailable 0; each old one serves %s after its endpoint goes)", len(old), DelayShutdown)
	return nil
}

// scale scales the scale Deployment to 0, waits until every worker's proxy
// has no endpoint for it (refusing no-endpoints), holds, scales it back to
// 2 and waits until the proxies balance over the new pods and the old ones
// are gone.
func (r *runner) scale(ctx context.Context, w *Window) error {
	w.Target = TargetScale
	old, err := r.livePods(ctx, TargetScale)
	if err != nil {
		return err
	}
	w.Pods = podNames(old)
	w.Start = time.Now()
	if err := r.setReplicas(ctx, TargetScale, 0); err != nil {
		return err
	}
	w.step("scaled to 0")
	if err := r.waitProgrammed(ctx, r.wl.services[TargetScale], nil); err != nil {
		return err
	}
	w.step("no endpoint on any worker's proxy")
	if !sleepCtx(ctx, r.cfg.ScaleHold) {
		return ctx.Err()
	}
	if err := r.setReplicas(ctx, TargetScale, 2); err != nil {
		return err
	}
	w.step("scaled to 2")
	if err := r.waitReplaced(ctx, w, TargetScale, 2, old); err != nil {
		return err
	}
	w.notef("held at 0 for %s after every worker's proxy had no endpoint", r.cfg.ScaleHold)
	return nil
}

func (r *runner) setReplicas(ctx context.Context, name string, n int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := r.c.CS.AppsV1().Deployments(Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale %s to %d: %w", name, n, err)
	}
	return nil
}

// waitReplaced waits until Deployment name runs n Ready pods, none of old
// is left (each served out its shutdown delay), and every worker's proxy
// holds exactly the new pods.
func (r *runner) waitReplaced(ctx context.Context, w *Window, name string, n int, old []corev1.Pod) error {
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		all, err := backendPods(ctx, r.c, name)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = pods[:0]
		for _, p := range all {
			if slices.Contains(w.Pods, p.Name) {
				last = "old pod " + p.Name + " still there (" + cluster.PodState(&p) + ")"
				return false, nil
			}
			if p.DeletionTimestamp == nil && cluster.PodReady(&p) {
				pods = append(pods, p)
			}
		}
		last = fmt.Sprintf("%d of %d new pods Ready", len(pods), n)
		return len(pods) == n, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s: %w (%s)", name, err, last)
	}
	w.step("new pods Ready, old pods gone")
	if err := r.waitProgrammed(ctx, r.wl.services[name], pods); err != nil {
		return err
	}
	w.step("every worker's proxy holds the new pods")
	return nil
}

// livePods are Deployment name's pods that are not being deleted.
func (r *runner) livePods(ctx context.Context, name string) ([]corev1.Pod, error) {
	all, err := backendPods(ctx, r.c, name)
	var out []corev1.Pod
	for _, p := range all {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, err
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// waitProgrammed waits until every worker's proxy holds exactly pods as
// the endpoints of svc's port 80 (none: an empty assignment).
func (r *runner) waitProgrammed(ctx context.Context, svc *corev1.Service, pods []corev1.Pod) error {
	vip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return fmt.Errorf("service %s: clusterIP %q: %w", svc.Name, svc.Spec.ClusterIP, err)
	}
	name := contract.ClusterName(vip, 80)
	var want []string
	for _, p := range pods {
		want = append(want, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(workload.EchoPort)))
	}
	slices.Sort(want)
	// What a proxy last held and the last failed read are kept apart: a
	// read cut by the deadline must not hide what the proxies held.
	var last, lastErr string
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range r.c.Workers() {
			eps, err := proxy.Endpoints(ctx, r.c, n.Name)
			if err != nil {
				lastErr = err.Error()
				return false, nil
			}
			got, ok := eps[name]
			var gs []string
			for _, e := range got {
				gs = append(gs, e.String())
			}
			if !ok || !slices.Equal(gs, want) {
				last = fmt.Sprintf("proxy on %s: %s has %v (present %v), want %v", n.Name, name, gs, ok, want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		if lastErr != "" {
			last = strings.TrimPrefix(last+"; last failed read: "+lastErr, "; ")
		}
		return fmt.Errorf("programming %s: %w (%s)", name, err, last)
	}
	return nil
}

// kubeProxy restarts node's kube-proxy and waits until the guard there has
// cut every soak Service again.
func (r *runner) kubeProxy(ctx context.Context, w *Window, node string) error {
	w.Node = node
	before, err := r.guardState(ctx, node)
	if err != nil {
		return err
	}
	kp, err := faults.RestartKubeProxy(ctx, r.c, node, 2*time.Minute)
	w.Start = kp.Deleted
	if err != nil {
		return err
	}
	w.Steps = append(w.Steps, Step{"pod deleted", kp.Deleted}, Step{"new pod Ready", kp.Ready})
	var after map[string]kubeproxyguard.ServiceStatus
	var last string
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		after, err = r.guardState(ctx, node)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for name, b := range before {
			a, ok := after[name]
			if !ok || a.Redeletions <= b.Redeletions || a.State != kubeproxyguard.StateClean {
				last = fmt.Sprintf("%s: redeletions %d (before %d), state %q", name, a.Redeletions, b.Redeletions, a.State)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the guard on %s did not cut every soak Service again: %w (%s)", node, err, last)
	}
	w.step("guard cut every soak Service again")
	var lat []float64
	r.mu.Lock()
	for _, name := range sortedKeys(after) {
		a := after[name]
		d := Redeletion{Node: node, Service: name, Latency: time.Duration(a.LastRedeletionLatencySeconds * float64(time.Second))}
		if a.LastRedeletion != nil {
			d.AfterDelete = a.LastRedeletion.Sub(kp.Deleted)
		}
		r.rec.Figures.Redeletions = append(r.rec.Figures.Redeletions, d)
		lat = append(lat, a.LastRedeletionLatencySeconds*1000)
	}
	r.mu.Unlock()
	w.notef("new kube-proxy Ready %s after the delete; the guard cut %d Services again, latency p50 %.1f ms, max %.1f ms",
		kp.Ready.Sub(kp.Deleted).Round(100*time.Millisecond), len(after), Percentile(lat, 50), Percentile(lat, 100))
	return nil
}

// guardState is node's guard's status of every soak Service.
func (r *runner) guardState(ctx context.Context, node string) (map[string]kubeproxyguard.ServiceStatus, error) {
	sts, err := guard.Statuses(ctx, r.c)
	if err != nil {
		return nil, err
	}
	st, ok := sts[node]
	if !ok {
		return nil, fmt.Errorf("no guard on %s", node)
	}
	out := map[string]kubeproxyguard.ServiceStatus{}
	for _, s := range st.Services {
		if s.Namespace == Namespace {
			out[s.Name] = s
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the guard on %s guards no Service of %s", node, Namespace)
	}
	return out, nil
}

// The kubelet holds back the restart of a container that exits within
// 10 min of its last restart, 10 s doubling up to 5 min (CrashLoopBackOff;
// client-go flowcontrol.Backoff forgets an entry after twice its 5 min
// maximum). A long soak's cycles are about 5 min apart, so a container
// fault (and an apiserver outage, which makes the controllers exit)
// repeats only once backOffForgotten has passed since the container was
// last back: within it, the fault would measure the kubelet's policy,
// not the container's restart. restartWithin still covers the longest
// hold, should one happen.
const (
	backOffForgotten = 10*time.Minute + 30*time.Second
	restartWithin    = 6 * time.Minute
)

// heldBack says whether a window about to restart what on node (when it
// was last back: restarted[key]) is skipped: the kubelet would hold the
// restart back. The window then notes why and ends at once.
func (r *runner) heldBack(w *Window, key, what, node string) bool {
	last, ok := r.restarted[key]
	if !ok || time.Since(last) >= backOffForgotten {
		return false
	}
	w.Skipped = true
	w.notef("skipped: %s on %s came back %s ago; the kubelet holds a restart within %s of the last one back (CrashLoopBackOff)",
		what, node, time.Since(last).Round(time.Second), backOffForgotten)
	return true
}

// agentRestart restarts node's agent container.
func (r *runner) agentRestart(ctx context.Context, w *Window, node string) error {
	w.Node = node
	if r.heldBack(w, "agent/"+node, "the agent", node) {
		return nil
	}
	rs, err := faults.RestartAgent(ctx, r.c, node, restartWithin)
	defer func() { r.restarted["agent/"+node] = time.Now() }()
	w.Start = rs.Killed
	w.Steps = append(w.Steps, Step{"killed", rs.Killed}, Step{"running", rs.Running}, Step{"serving /status", rs.Ready})
	if err != nil {
		return err
	}
	w.notef("agent down %s, serving again %s after the kill (restart count %d)", rs.Down().Round(100*time.Millisecond), rs.Total().Round(100*time.Millisecond), rs.RestartCount)
	if rs.BackOff {
		w.notef("the kubelet held the restart back (CrashLoopBackOff: killed again within 10 min of its last restart)")
	}
	return nil
}

// proxyRestart restarts node's proxy container and waits until every
// soak pod's capture listener on node is bound again.
func (r *runner) proxyRestart(ctx context.Context, w *Window, node string) error {
	w.Node = node
	if r.heldBack(w, "proxy/"+node, "the node proxy", node) {
		return nil
	}
	defer func() { r.restarted["proxy/"+node] = time.Now() }()
	b, err := r.c.NodeGet(ctx, node, contract.AgentPort, "/status")
	if err != nil {
		return err
	}
	st, err := agent.DecodeStatus(b)
	if err != nil {
		return err
	}
	netns := map[string]string{}
	for _, l := range st.Listeners {
		if l.Namespace == Namespace {
			netns[l.Pod] = l.Netns
		}
	}
	if err := r.stats.bank(ctx, r.c, node, true); err != nil {
		return err
	}
	// The kubelet reports the new container late (its pod status is
	// batched): watch the load client's listener itself, from before the
	// kill, for when it went and came back.
	var gone, back time.Time
	wctx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer func() {
		stopWatch()
		watching.Wait()
	}()
	if ns, ok := netns["load-"+node]; ok {
		watching.Go(func() {
			for wctx.Err() == nil {
				ls, err := proxy.Listening(wctx, r.c, node, ns)
				now := time.Now()
				up := err == nil && slices.ContainsFunc(ls, func(a netip.AddrPort) bool { return a.Port() == contract.CapturePort })
				switch {
				case err != nil:
				case !up && gone.IsZero():
					gone = now
				case up && !gone.IsZero():
					back = now
					return
				}
			}
		})
	}
	rs, err := faults.RestartProxy(ctx, r.c, node, restartWithin)
	w.Start = rs.Killed
	w.Steps = append(w.Steps, Step{"killed", rs.Killed}, Step{"running (kubelet)", rs.Running}, Step{"/ready LIVE", rs.Ready})
	if err != nil {
		stopWatch()
		watching.Wait()
		return err
	}
	for _, pod := range sortedKeys(netns) {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			ls, err := proxy.Listening(ctx, r.c, node, netns[pod])
			if err != nil {
				return false, nil
			}
			for _, l := range ls {
				if l.Port() == contract.CapturePort {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("%s's listener not bound again: %w", pod, err)
		}
		w.step("listener of " + pod + " bound")
	}
	w.End = time.Now()
	stopWatch()
	watching.Wait()
	if !gone.IsZero() && !back.IsZero() {
		w.Steps = append(w.Steps, Step{"client's listener seen gone", gone}, Step{"client's listener seen back", back})
		w.notef("the client's listener was seen gone %s after the kill and back %s later (polled through the node, ~%s a read)",
			gone.Sub(rs.Killed).Round(10*time.Millisecond), back.Sub(gone).Round(10*time.Millisecond), pollCost)
	}
	w.notef("kill → the kubelet reports it running %s (its status lags), → /ready %s, → every listener bound %s",
		rs.Down().Round(10*time.Millisecond), rs.Ready.Sub(rs.Running).Round(10*time.Millisecond), w.End.Sub(rs.Ready).Round(10*time.Millisecond))
	if rs.BackOff {
		w.notef("the kubelet held the restart back (CrashLoopBackOff: killed again within 10 min of its last restart)")
	}
	return nil
}

// apiserver makes the apiserver unavailable for about cfg.APIServerHold
// plus its restart.
func (r *runner) apiserver(ctx context.Context, w *Window) error {
	node, err := faults.ControlPlane(r.c)
	if err != nil {
		return err
	}
	w.Node = node
	if r.heldBack(w, controllersKey(node), "kube-controller-manager and kube-scheduler", node) {
		return nil
	}
	o, err := faults.APIServerOutage(ctx, r.c, r.cfg.APIServerHold, 3*time.Minute)
	w.Node, w.Start = o.Node, o.Parked
	for _, s := range []Step{{"manifest moved away", o.Parked}, {"/readyz failing", o.Down}, {"manifest back", o.Restored}, {"/readyz ok", o.Up}} {
		if !s.At.IsZero() {
			w.Steps = append(w.Steps, s)
		}
	}
	if err != nil {
		return err
	}
	w.notef("apiserver unavailable %s (held away %s, then %s to start)", o.Unavailable().Round(100*time.Millisecond), r.cfg.APIServerHold, o.Up.Sub(o.Restored).Round(100*time.Millisecond))
	// The window lasts until the controllers lead again: the next fault
	// (a Service recreated, a rollout) needs their EndpointSlices and
	// garbage collection, and a control plane half back would be judged
	// as that fault's.
	leading, err := faults.WaitControllersLeading(ctx, r.c, o.Up, 3*time.Minute)
	r.restarted[controllersKey(o.Node)] = time.Now()
	if err != nil {
		return err
	}
	w.step("controllers lead again")
	n, err := faults.ControllerRestarts(ctx, r.c, o.Node)
	if err != nil {
		return err
	}
	w.notef("controllers lead again %s after /readyz ok (restarts so far: %s)", leading.Sub(o.Up).Round(100*time.Millisecond), formatCounts(n))
	return nil
}

// controllersKey is restarted's key of the control plane's controllers,
// which an apiserver outage restarts (faults.WaitControllersLeading).
func controllersKey(node string) string { return "controllers/" + node }

func formatCounts(n map[string]int32) string {
	var out []string
	for _, k := range sortedKeys(n) {
		out = append(out, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(out, ", ")
}

// recreate deletes the recreate Service and creates it again under another
// ClusterIP; it ends when Kubernetes is done with it (every EndpointSlice
// is the new Service's, every worker's proxy holds the backends there),
// every cluster DNS server answers the new address and every client has
// resolved it last and reached it.
func (r *runner) recreate(ctx context.Context, w *Window) error {
	w.Target = TargetRecreate
	old := r.wl.services[TargetRecreate]
	oldAddr := workload.Addr(old, 80)
	w.Addrs = []string{oldAddr}
	ips, err := r.c.FreeServiceIPs(ctx, 2)
	if err != nil {
		return err
	}
	ip := ips[0]
	if ip.String() == old.Spec.ClusterIP {
		ip = ips[1]
	}
	w.Start = time.Now()
	if err := r.c.DeleteService(ctx, Namespace, TargetRecreate, time.Minute); err != nil {
		return err
	}
	w.step("deleted")
	svc := workload.Service(Namespace, TargetRecreate, workload.ServiceOptions{Selector: old.Spec.Selector, Cut: true,
		Mutate: func(s *corev1.Service) { s.Spec.ClusterIP = ip.String() }})
	created, err := r.c.CreateService(ctx, svc, time.Minute)
	if err != nil {
		return err
	}
	r.wl.services[TargetRecreate] = created
	newAddr := workload.Addr(created, 80)
	w.step("created at " + created.Spec.ClusterIP)
	if _, err := guard.WaitCutVIP(ctx, r.c, created, time.Minute); err != nil {
		return err
	}
	w.step("cut off kube-proxy")
	// Kubernetes finishes a recreate too: the old Service's EndpointSlices
	// go (the EndpointSlice controller or the garbage collector deletes
	// them) and the new one's come. The agent, like kube-proxy, files
	// slices by their kubernetes.io/service-name label, so until then it
	// may use the old ones or, should they go first, see none: a refusal
	// then is this fault's.
	if err := r.waitOwnSlices(ctx, created); err != nil {
		return err
	}
	w.step("every EndpointSlice is the new Service's")
	backends, err := r.livePods(ctx, TargetRecreate)
	if err != nil {
		return err
	}
	if err := r.waitProgrammed(ctx, created, backends); err != nil {
		return err
	}
	w.step("every worker's proxy holds the backends at " + created.Spec.ClusterIP)
	// The clients follow the cluster DNS, and every DNS server must have
	// the new address before a client is done with the old one: one
	// CoreDNS replica still answering the old ClusterIP (its informer late,
	// as after the apiserver's outage) sends clients back to it.
	name := TargetRecreate + "." + Namespace + ".svc.cluster.local."
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, why, err := r.dnsAnswers(ctx, name, created.Spec.ClusterIP)
		if err != nil || !ok {
			last = why
			if err != nil {
				last = err.Error()
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the cluster DNS did not move %s to %s: %w (%s)", name, created.Spec.ClusterIP, err, last)
	}
	w.step("every DNS server answers " + created.Spec.ClusterIP)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for i := range r.wl.clients {
			p := &r.wl.clients[i]
			evs, err := r.clientEvents(ctx, p, w.Start)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if ok, why := reached(evs, TargetRecreate, newAddr, w.Start); !ok {
				last = p.Name + ": " + why
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("clients did not move to %s: %w (%s)", newAddr, err, last)
	}
	w.step("every client reached the new address")
	w.notef("%s → %s", oldAddr, newAddr)
	return nil
}

// waitOwnSlices waits until svc has EndpointSlices and every slice filed
// under its name is controlled by it (by its UID: none is left of an
// earlier Service of the same name).
func (r *runner) waitOwnSlices(ctx context.Context, svc *corev1.Service) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := r.c.CS.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(l.Items) == 0 {
			last = "no EndpointSlice yet"
			return false, nil
		}
		for i := range l.Items {
			if !metav1.IsControlledBy(&l.Items[i], svc) {
				last = "EndpointSlice " + l.Items[i].Name + " is not controlled by Service UID " + string(svc.UID)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("EndpointSlices of %s/%s: %w (%s)", svc.Namespace, svc.Name, err, last)
	}
	return nil
}

// dnsAnswers says whether every ready cluster DNS server (the kube-dns
// Service's endpoints, asked one by one from the scan pod) answers name
// with ip alone.
func (r *runner) dnsAnswers(ctx context.Context, name, ip string) (bool, string, error) {
	eps, err := r.c.CS.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
	if err != nil {
		return false, "", fmt.Errorf("kube-dns endpoints: %w", err)
	}
	var servers []string
	for _, sl := range eps.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				servers = append(servers, net.JoinHostPort(a, "53"))
			}
		}
	}
	if len(servers) == 0 {
		return false, "no ready kube-dns endpoint", nil
	}
	pod := r.wl.scan
	for _, srv := range servers {
		out, _, err := r.c.Exec(ctx, pod.Namespace, pod.Name, workload.ClientContainer, "/svclb-echo", "lookup",
			"-name="+name, "-server="+srv, "-count=1", "-timeout=2s")
		if err != nil {
			return false, "", fmt.Errorf("lookup of %s at %s: %w", name, srv, err)
		}
		var res echo.LookupResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil {
			return false, "", fmt.Errorf("lookup of %s at %s: %q: %w", name, srv, out, err)
		}
		if !res.OK || len(res.Addrs) != 1 || res.Addrs[0] != ip {
			return false, fmt.Sprintf("%s answers %s with %v (%s)", srv, name, res.Addrs, res.Err), nil
		}
	}
	return true, "", nil
}

// reached says whether a client's events since since show target resolved
// to addr last and a success there after every failure.
func reached(evs []echo.LoadEvent, target, addr string, since time.Time) (bool, string) {
	var resolved, lastFail, lastOK time.Time
	for _, e := range evs {
		if e.Target != target || e.Time.Before(since) {
			continue
		}
		switch {
		case e.Kind == echo.LoadResolve && e.Addr == addr:
			resolved = e.Time
		case e.Kind == echo.LoadResolve:
			// Sent back to another address (a late DNS server): not there yet.
			resolved, lastOK = time.Time{}, time.Time{}
		case e.Kind == echo.LoadFail:
			lastFail = e.Time
		case e.Kind == echo.LoadRecover && e.Addr == addr:
			lastOK = e.Time
		case e.Kind == echo.LoadSecond && e.OK > 0:
			if t := time.Unix(e.Second, 0); t.After(lastOK) {
				lastOK = t
			}
		}
	}
	switch {
	case resolved.IsZero():
		return false, "has not resolved " + target + " to " + addr + " last"
	case !lastOK.After(resolved) || !lastOK.After(lastFail):
		return false, "no success at " + addr + " after its last failure"
	}
	return true, ""
}

// scan dials the first cfg.ScanHosts addresses of the Service range on
// cfg.ScanPorts from the scan pod, and checks that the node's snapshot grew
// by at most the Service ports it hit.
func (r *runner) scan(ctx context.Context, w *Window) error {
	pod := r.wl.scan
	node := pod.Spec.NodeName
	w.Node = node
	b, err := r.c.NodeGet(ctx, node, contract.AgentPort, "/status")
	if err != nil {
		return err
	}
	st, err := agent.DecodeStatus(b)
	if err != nil {
		return err
	}
	if len(st.Range) == 0 {
		return fmt.Errorf("the agent on %s knows no Service range", node)
	}
	prefix, err := netip.ParsePrefix(st.Range[0])
	if err != nil {
		return err
	}
	sw := echo.SweepOptions{Prefix: prefix, Hosts: r.cfg.ScanHosts, Ports: r.cfg.ScanPorts}
	addrs, err := sw.Addresses()
	if err != nil {
		return err
	}
	known, err := r.knownPorts(ctx, addrs)
	if err != nil {
		return err
	}
	before, err := r.snapshot(ctx, "before scan", node)
	if err != nil {
		return err
	}
	var ports []string
	for _, p := range r.cfg.ScanPorts {
		ports = append(ports, strconv.Itoa(int(p)))
	}
	w.Start = time.Now()
	out, _, err := r.c.Exec(ctx, pod.Namespace, pod.Name, workload.ClientContainer, "/svclb-echo", "sweep",
		"-prefix="+prefix.String(), "-hosts="+strconv.Itoa(r.cfg.ScanHosts), "-ports="+strings.Join(ports, ","),
		"-parallel="+strconv.Itoa(r.cfg.ScanParallel), "-timeout="+r.cfg.Timeout.String())
	w.End = time.Now()
	if err != nil {
		return err
	}
	rs, err := workload.ParseDial(out)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.rec.Sweeps == nil {
		r.rec.Sweeps = map[string]Scan{}
	}
	r.rec.Sweeps[w.Name] = Scan{Node: node, Pod: pod.Name, Results: rs}
	r.mu.Unlock()
	after, err := r.snapshot(ctx, "after scan", node)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.rec.Figures.Snapshots = append(r.rec.Figures.Snapshots, before, after)
	r.rec.Figures.Bounds = append(r.rec.Figures.Bounds,
		Bound{What: "svc: clusters on " + node + " after the scan", OK: after.SvcClusters <= before.SvcClusters+known,
			Detail: fmt.Sprintf("%d before, %d after; bound %d = before + the %d Service ports among the %d addresses scanned", before.SvcClusters, after.SvcClusters, before.SvcClusters+known, known, len(addrs))},
		Bound{What: "on-demand pending names on " + node + " after the scan", OK: after.Pending <= before.Pending+len(addrs)*len(ports),
			Detail: fmt.Sprintf("%d before, %d after; bound %d = before + the %d names scanned (the agent keeps every refused name the proxy keeps subscribed)",
				before.Pending, after.Pending, before.Pending+len(addrs)*len(ports), len(addrs)*len(ports))})
	r.mu.Unlock()
	by := map[string]int{}
	for _, x := range rs {
		by[echo.Outcome(x)]++
	}
	w.notef("%d connections (%d addresses × %d ports, %d at once): %v; svc: clusters %d → %d, CDS+EDS %d → %d B, pending %d",
		len(rs), r.cfg.ScanHosts, len(r.cfg.ScanPorts), r.cfg.ScanParallel, by, before.SvcClusters, after.SvcClusters,
		before.CDSBytes+before.EDSBytes, after.CDSBytes+after.EDSBytes, after.Pending)
	return nil
}

// knownPorts counts the TCP Service ports (default/kubernetes aside) among
// addrs: what a scan of them may rightly admit.
func (r *runner) knownPorts(ctx context.Context, addrs []string) (int, error) {
	svcs, err := r.c.CS.CoreV1().Services(corev1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	set := map[string]bool{}
	for _, a := range addrs {
		set[a] = true
	}
	n := 0
	for _, s := range svcs.Items {
		if contract.IsAPIServerService(s.Namespace, s.Name) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Protocol == corev1.ProtocolTCP && set[net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port)))] {
				n++
			}
		}
	}
	return n, nil
}

// firstConn dials each first-connection Service of cycle twice from every
// load client: the first connection is held while the proxy asks for the
// cluster, the second finds it.
func (r *runner) firstConn(ctx context.Context, w *Window, cycle int) error {
	if cycle >= len(r.wl.firstConn) {
		return fmt.Errorf("no first-connection Services for cycle %d", cycle+1)
	}
	var to []string
	for _, s := range r.wl.firstConn[cycle] {
		to = append(to, workload.Addr(s, 80))
	}
	w.Start = time.Now()
	results := make([][]echo.Result, len(r.wl.clients))
	errs := make([]error, len(r.wl.clients))
	var wg sync.WaitGroup
	for i := range r.wl.clients {
		p := &r.wl.clients[i]
		wg.Go(func() {
			out, _, err := r.c.Exec(ctx, p.Namespace, p.Name, workload.ClientContainer, "/svclb-echo", "sweep",
				"-to="+strings.Join(to, ","), "-count=2", "-parallel=1", "-timeout="+r.cfg.Timeout.String())
			if err == nil {
				results[i], err = workload.ParseDial(out)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	w.End = time.Now()
	var all []echo.Result
	r.mu.Lock()
	for i, rs := range results {
		if r.rec.Sweeps == nil {
			r.rec.Sweeps = map[string]Scan{}
		}
		p := r.wl.clients[i]
		r.rec.Sweeps[w.Name+" from "+p.Spec.NodeName] = Scan{Node: p.Spec.NodeName, Pod: p.Name, Results: rs}
		all = append(all, rs...)
	}
	r.rec.Figures.FirstConn = FirstConnLatency(r.allFirstConn())
	l := FirstConnLatency(all)
	r.rec.Figures.Bounds = append(r.rec.Figures.Bounds, Bound{What: "first connections (" + w.Name + ")", OK: l.Failed == 0 && l.N == len(to)*len(results),
		Detail: fmt.Sprintf("%d of %d first connections and their second ones answered; %d failed", l.N, len(to)*len(results), l.Failed)})
	r.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	w.notef("first connection p50 %.1f ms, p99 %.1f ms; warm p50 %.1f ms, p99 %.1f ms (%d Services × %d clients)",
		l.FirstP50, l.FirstP99, l.WarmP50, l.WarmP99, len(to), len(results))
	// The next cycle's Services, created now so every agent knows them by
	// then.
	next, err := createFirstConn(ctx, r.c, r.wl.services[TargetSteady], cycle+1, r.cfg.FirstConnCount)
	if err != nil {
		return err
	}
	r.wl.firstConn = append(r.wl.firstConn, next)
	return nil
}

// allFirstConn are the results of every first-connection probe so far.
func (r *runner) allFirstConn() []echo.Result {
	var out []echo.Result
	for name, sc := range r.rec.Sweeps {
		if strings.HasPrefix(name, "first connections") {
			out = append(out, sc.Results...)
		}
	}
	return out
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
