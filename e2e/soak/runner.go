package soak

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/faults"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// runner runs one soak against a cluster the env funcs connected to and
// deployed the guard and node DaemonSet on.
type runner struct {
	c     *cluster.Cluster
	cfg   Config
	rec   *Record
	wl    workloads
	stats *statsBank
	log   *kit.Progress
	// restarted is when what each fault restarts ("agent/<node>",
	// "proxy/<node>", controllersKey) was last back (heldBack).
	restarted map[string]time.Time
	// banked are the load events of client containers a fault stopped,
	// by pod (clientEvents).
	banked map[string][]echo.LoadEvent

	mu sync.Mutex // rec's slices, from the sampler and the faults
}

// logf prints one progress line with the time since the run started.
func (r *runner) logf(format string, args ...any) { r.log.Printf(format, args...) }

// phase times f as a phase of the report.
func (r *runner) phase(name string, f func() error) error {
	d, err := r.log.Step(name, f)
	r.mu.Lock()
	r.rec.Phases = append(r.rec.Phases, Phase{Name: name, Took: d})
	r.mu.Unlock()
	return err
}

// Run runs the soak and fills rec; the returned error is one that kept it
// from running (the verdict judges what it observed). Whatever happens, the
// cluster is left as it was found: the namespace deleted, the agent's
// ConfigMap restored, the apiserver back. log gets its progress lines.
func Run(ctx context.Context, c *cluster.Cluster, cfg Config, rec *Record, log *kit.Progress) (err error) {
	r := &runner{c: c, cfg: cfg, rec: rec, stats: newStatsBank(), log: log, restarted: map[string]time.Time{},
		banked: map[string][]echo.LoadEvent{}}
	rec.Settings = cfg.Settings
	rec.Env.Proxy, rec.Env.Namespace = cfg.Proxy, Namespace
	rec.Env.NodeAccess, rec.Env.NodeAccessWhy = string(c.Access), c.AccessWhy
	for _, n := range c.Nodes {
		rec.Env.Nodes = append(rec.Env.Nodes, n.Name)
	}
	rec.Env.Workers = cluster.NodeNames(c.Workers())
	if len(rec.Env.Workers) == 0 {
		return fmt.Errorf("no worker nodes among %v", rec.Env.Nodes)
	}
	if v, verr := c.CS.Discovery().ServerVersion(); verr == nil {
		rec.Env.KubernetesVersion = v.GitVersion
	}
	// A run interrupted during the outage left the manifest parked, or
	// during a node loss the node stopped.
	if err := faults.RestoreNodes(ctx, c); err != nil {
		return err
	}
	if err := faults.RestoreAPIServer(ctx, c); err != nil {
		return err
	}
	before := rec.Env.AgentConfigBefore
	if before == nil {
		var err error
		if before, err = agentConfig(ctx, c); err != nil {
			return err
		}
		rec.Env.AgentConfigBefore = before
	}
	defer func() {
		// A context of its own: the run's may have ended.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if cerr := r.cleanup(cctx, before); cerr != nil {
			rec.Errors = append(rec.Errors, "cleanup: "+cerr.Error())
			if err == nil {
				err = cerr
			}
		}
	}()
	if err := r.setup(ctx); err != nil {
		return err
	}
	sctx, stopSampler := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { r.sampler(sctx) })
	defer func() {
		stopSampler()
		sampling.Wait()
	}()
	if err := r.startLoad(ctx); err != nil {
		return err
	}
	r.schedule(ctx)
	return r.finish(ctx)
}

// agentConfig is the agent ConfigMap's data now.
func agentConfig(ctx context.Context, c *cluster.Cluster) (map[string]string, error) {
	cm, err := c.CS.CoreV1().ConfigMaps(contract.Namespace).Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get configmap %s: %w", contract.AgentConfigMap, err)
	}
	out := map[string]string{}
	for k, v := range cm.Data {
		out[k] = v
	}
	return out, nil
}

// phasesOn is Phase 1 and 2 on, with the CDS mode given.
func phasesOn(cds agentstatus.CDSMode) map[string]string {
	return map[string]string{contract.KeyPhase1: "true", contract.KeyPhase2: "true", contract.KeyCDS: string(cds)}
}

// setup deploys the workloads with both phases on, measures every node's
// snapshot in proactive mode, then switches to on-demand mode, the mode the
// soak runs in (docs/soak.md, "Modes").
func (r *runner) setup(ctx context.Context) error {
	if err := r.phase("setup: phases on, proactive CDS", func() error {
		return agent.SetConfig(ctx, r.c, phasesOn(agentstatus.CDSProactive))
	}); err != nil {
		return err
	}
	if err := r.phase("setup: backends and Services", func() error {
		svcs, err := deployBackends(ctx, r.c)
		if err != nil {
			return err
		}
		r.wl.services = svcs
		pods, err := backendPods(ctx, r.c, TargetSteady)
		if err != nil || len(pods) == 0 {
			return fmt.Errorf("steady backends: %v (%d pods)", err, len(pods))
		}
		r.wl.direct = net.JoinHostPort(pods[0].Status.PodIP, strconv.Itoa(workload.EchoPort))
		for _, name := range r.cfg.Faults {
			// A fault that will be skipped (runnable) needs nothing in place.
			if f, ok := faultOf(name); ok && skipWhy(f, r.c) == nil {
				if p, ok := f.(preparer); ok {
					if err := p.Prepare(ctx, r); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
				}
			}
		}
		n, err := r.c.ServicePorts(ctx)
		r.rec.Env.ServicePorts = n
		return err
	}); err != nil {
		return err
	}
	r.snapshots(ctx, "setup, proactive")
	return r.phase("setup: on-demand CDS", func() error {
		return agent.SetConfig(ctx, r.c, phasesOn(agentstatus.CDSOnDemand))
	})
}

// leadIn and tail are the quiet minutes around the schedule: the load's
// steady state before the first fault, and proof that everything returned
// after the last.
const (
	leadIn = 15 * time.Second
	tail   = 30 * time.Second
)

// startLoad starts the clients and waits until every client has a success
// on every target.
func (r *runner) startLoad(ctx context.Context) error {
	return r.phase("load: clients", func() error {
		// The load bounds itself: long enough for the schedule, never
		// forever.
		run := r.cfg.Duration + 20*time.Minute
		clients, scan, err := deployClients(ctx, r.c, loadArgs(r.cfg.Settings, r.wl.direct, run))
		if err != nil {
			return err
		}
		r.wl.clients, r.wl.scan = clients, scan
		for _, n := range r.c.Nodes {
			if err := r.stats.mark(ctx, r.c, n.Name); err != nil {
				return err
			}
		}
		var last string
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			for i := range r.wl.clients {
				p := &r.wl.clients[i]
				evs, err := r.clientEvents(ctx, p, time.Time{})
				if err != nil {
					last = err.Error()
					return false, nil
				}
				ok := map[string]bool{}
				for _, e := range evs {
					if e.Kind == echo.LoadSecond && e.OK > 0 {
						ok[e.Target] = true
					}
				}
				for _, t := range targets() {
					if !ok[t] {
						last = fmt.Sprintf("client %s: no success on %s yet", p.Name, t)
						return false, nil
					}
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("the load did not get going: %w (%s)", err, last)
		}
		r.rec.LoadStart = time.Now()
		return nil
	})
}

// finish ends the judged load after the tail, reads what the clients and
// nodes recorded, and measures the end.
func (r *runner) finish(ctx context.Context) error {
	end := r.rec.LoadStart.Add(r.cfg.Duration)
	if last := r.lastWindowEnd().Add(tail); last.After(end) {
		end = last
	}
	r.logf("quiet until %s (%s from now)", end.Format("15:04:05"), time.Until(end).Round(time.Second))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(end)):
	}
	r.rec.LoadEnd = time.Now()
	return r.phase("collect", func() error {
		for _, n := range r.c.Nodes {
			if err := r.stats.bank(ctx, r.c, n.Name, false); err != nil {
				return err
			}
		}
		r.rec.Figures.Split = r.stats.rows(cluster.NodeNames(r.c.Nodes))
		r.rec.Figures.ProxyNC = r.stats.noRoutes(cluster.NodeNames(r.c.Nodes))
		r.snapshots(ctx, "end")
		// A client prints a second once every attempt started in it has
		// ended: wait until every target's second of LoadEnd is printed.
		endSec := r.rec.LoadEnd.Unix()
		var last string
		err := wait.PollUntilContextTimeout(ctx, time.Second, r.cfg.Timeout+time.Minute, true, func(ctx context.Context) (bool, error) {
			r.rec.Clients = r.rec.Clients[:0]
			for i := range r.wl.clients {
				p := &r.wl.clients[i]
				evs, err := r.clientEvents(ctx, p, time.Time{})
				if err != nil {
					last = err.Error()
					return false, nil
				}
				seen := map[string]bool{}
				for _, e := range evs {
					if e.Kind == echo.LoadSecond && e.Second >= endSec {
						seen[e.Target] = true
					}
				}
				for _, t := range targets() {
					if !seen[t] {
						last = fmt.Sprintf("client %s has not printed second %d of %s", p.Name, endSec, t)
						return false, nil
					}
				}
				r.rec.Clients = append(r.rec.Clients, Client{Pod: p.Name, Node: p.Spec.NodeName, PodIP: p.Status.PodIP, Events: evs})
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("reading the clients' events: %w (%s)", err, last)
		}
		// Once more, now that every attempt has ended: a refusal reaches
		// the agent's log when the proxy's access-log stream delivers it,
		// which can be seconds late (the stream reconnects after the
		// agent's restart).
		return r.refusals(ctx, r.rec.LoadStart)
	})
}

func (r *runner) lastWindowEnd() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.rec.LoadStart
	for _, w := range r.rec.Windows {
		if w.End.After(t) {
			t = w.End
		}
	}
	return t
}

// cleanup leaves the cluster as the run found it.
func (r *runner) cleanup(ctx context.Context, before map[string]string) error {
	var errs []error
	if err := faults.RestoreNodes(ctx, r.c); err != nil {
		errs = append(errs, err)
	}
	if err := faults.RestoreAPIServer(ctx, r.c); err != nil {
		errs = append(errs, err)
	}
	if err := restoreAgentConfig(ctx, r.c, before); err != nil {
		errs = append(errs, err)
	}
	r.logf("cleanup: deleting namespace %s", Namespace)
	nss := r.c.CS.CoreV1().Namespaces()
	if err := nss.Delete(ctx, Namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	} else if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := nss.Get(ctx, Namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		errs = append(errs, fmt.Errorf("namespace %s not gone: %w", Namespace, err))
	}
	if err := nodePodsRunning(ctx, r.c, r.rec.Env.NotReadyBefore); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// restoreAgentConfig puts the ConfigMap's data back as it was and waits
// until every agent applied its phase and CDS keys.
func restoreAgentConfig(ctx context.Context, c *cluster.Cluster, before map[string]string) error {
	cms := c.CS.CoreV1().ConfigMaps(contract.Namespace)
	cm, err := cms.Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get configmap %s: %w", contract.AgentConfigMap, err)
	}
	cm.Data = before
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("restore configmap %s: %w", contract.AgentConfigMap, err)
	}
	want := map[string]string{}
	for _, k := range []string{contract.KeyPhase1, contract.KeyPhase2, contract.KeyCDS} {
		if v, ok := before[k]; ok {
			want[k] = v
		}
	}
	return agent.SetConfig(ctx, c, want)
}

// nodeNamespaces hold the pods the faults restart and the ones the soak
// deploys.
var nodeNamespaces = []string{"kube-system", contract.Namespace}

// notReadyPods are the pods of nodeNamespaces that are not Running and
// Ready.
func notReadyPods(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	var out []string
	for _, ns := range nodeNamespaces {
		l, err := c.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", ns, err)
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && (p.Status.Phase != corev1.PodRunning || !cluster.PodReady(&p)) {
				out = append(out, ns+"/"+p.Name)
			}
		}
	}
	return out, nil
}

// nodePodsRunning waits until every pod in kube-system and svclb-system is
// Running and Ready, but those of except (not Ready when the run started):
// what the faults restarted is back.
func nodePodsRunning(ctx context.Context, c *cluster.Cluster, except []string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		bad, err := notReadyPods(ctx, c)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		bad = slices.DeleteFunc(bad, func(p string) bool { return slices.Contains(except, p) })
		last = fmt.Sprint(bad)
		return len(bad) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("node pods not all Running and Ready: %w (%s)", err, last)
	}
	return nil
}
