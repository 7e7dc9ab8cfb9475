package perf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aether-mesh/svclb/e2e/perf/internal/nodestat"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/scale"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	// scaleNamespace holds a size's Services; deleted after each size.
	scaleNamespace = "svclb-perf-scale"
	// scaleEndpoints per Service: "a few".
	scaleEndpoints = 3
	// scalePoll is how often the nodes are read while they program: the
	// resolution of "programmed".
	scalePoll = time.Second
	// programAfterCreate bounds programming once every object exists
	// (programWithin).
	programAfterCreate = 3 * time.Minute
)

// programWithin bounds creating and programming one size, so that a size that does not fit
// stops within that time and says where.
func programWithin() time.Duration { return cfg.createWithin + programAfterCreate }

// TestScale: every size of SVCLB_PERF_SIZES in turn, each cleaned up before
// the next.
func TestScale(t *testing.T) {
	needCluster(t)
	for _, n := range cfg.sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			res := &result.Scale{Header: header(), Services: n, EndpointsPer: scaleEndpoints}
			err := measureScale(t.Context(), res)
			if err != nil {
				res.Broke = err.Error()
			}
			// The cluster is shared: the objects go whatever happened.
			if cerr := cleanupScale(context.WithoutCancel(t.Context()), n); cerr != nil {
				res.Notes = append(res.Notes, "cleanup: "+cerr.Error())
				err = errors.Join(err, cerr)
			}
			finish(&res.Header)
			if werr := result.Write(cfg.Artifacts, result.ScaleFile(n), res); werr != nil {
				t.Error(werr)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// nodeBase is a node before the size's objects exist: its processes, and
// the clusters its agent serves (the proxy holds those plus xds_cluster).
type nodeBase struct {
	agent, kubeProxy, nodeProxy nodestat.Sample
	clusters                    int64
}

// proxyHolds says whether node's proxy holds want clusters, none warming.
func proxyHolds(ctx context.Context, node string, want int64) bool {
	active, warming, err := proxyClusters(ctx, node)
	return err == nil && warming == 0 && active >= want
}

func measureScale(ctx context.Context, res *result.Scale) error {
	c := suite.cluster
	n := res.Services
	base := map[string]*nodeBase{}
	for _, node := range c.Nodes {
		b := &nodeBase{}
		var err error
		if b.clusters, err = settledClusters(ctx, node.Name); err != nil {
			return err
		}
		for _, p := range []struct {
			name string
			to   *nodestat.Sample
		}{{procAgent, &b.agent}, {procKubeProxy, &b.kubeProxy}, {procNodeProxy, &b.nodeProxy}} {
			if *p.to, err = readProc(ctx, node.Name, p.name); err != nil {
				return err
			}
		}
		base[node.Name] = b
		res.Nodes = append(res.Nodes, result.NodeScale{Node: node.Name})
	}

	// Unpaced, the apiserver takes objects as fast as it can: kubectl's client rate
	// (cluster.ClientQPS) would make creation, not programming, the figure. Paced
	// (SVCLB_PERF_CREATE_RATE), the client's token bucket spaces the two creates of each
	// Service (it and its EndpointSlice).
	rc := rest.CopyConfig(c.Client.RESTConfig())
	rc.QPS, rc.Burst = 500, 1000
	if cfg.createRate > 0 {
		rc.QPS, rc.Burst = float32(2*cfg.createRate), 2
		res.Notes = append(res.Notes, fmt.Sprintf("created at %g Services per second (SVCLB_PERF_CREATE_RATE)", cfg.createRate))
	}
	cpBefore, err := readControlPlane(ctx)
	if err != nil {
		return err
	}
	res.Notes = append(res.Notes, cpBefore.describe())
	defer func() {
		if cp, err := readControlPlane(context.WithoutCancel(ctx)); err == nil {
			res.Notes = append(res.Notes, cp.since(cpBefore))
		} else {
			res.Notes = append(res.Notes, err.Error())
		}
	}()
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	spec := scale.Spec{Namespace: scaleNamespace, Services: n, Endpoints: scaleEndpoints, Workers: 16}
	start := time.Now()
	progress("scale %d: creating %d Services × %d endpoints; %s", n, n, scaleEndpoints, load())
	created := make(chan error, 1)
	createCtx, stopCreating := context.WithTimeout(ctx, cfg.createWithin)
	defer stopCreating()
	go func() {
		step := max(n/5, 1)
		created <- scale.Populate(createCtx, kube, spec, func(done int) {
			if done%step == 0 {
				progress("scale %d: created %d (%s)", n, done, time.Since(start).Round(time.Second))
			}
		})
	}()

	// Every node programs them as they come: read each until it holds all.
	doneCreating := false
	err = wait.PollUntilContextTimeout(ctx, scalePoll, programWithin(), false, func(ctx context.Context) (bool, error) {
		if !doneCreating {
			select {
			case err := <-created:
				if err != nil {
					return false, fmt.Errorf("creating (at most %s: the run's bound): %w", cfg.createWithin, err)
				}
				doneCreating = true
				res.Created = time.Since(start)
				progress("scale %d: created in %s; %s", n, res.Created.Round(time.Second), load())
			default:
				// No node can hold n Services before n exist: reading every node each
				// second meanwhile (nft, the proxy's stats) only loads the machine
				// that is creating them.
				return false, nil
			}
		}
		all := true
		for i := range res.Nodes {
			ns := &res.Nodes[i]
			b := base[ns.Node]
			if ns.KubeProxy.Programmed == 0 {
				got, err := kubeProxyServices(ctx, ns.Node, scaleNamespace)
				if err == nil && got >= n {
					if err := programmed(ctx, ns.Node, procKubeProxy, start, b.kubeProxy, &ns.KubeProxy); err != nil {
						return false, err
					}
				}
			}
			if ns.Agent.Programmed == 0 {
				if proxyHolds(ctx, ns.Node, b.clusters+int64(n)+1) {
					if err := programmed(ctx, ns.Node, procAgent, start, b.agent, &ns.Agent); err != nil {
						return false, err
					}
					if err := programmed(ctx, ns.Node, procNodeProxy, start, b.nodeProxy, &ns.NodeProxy); err != nil {
						return false, err
					}
				}
			}
			all = all && ns.KubeProxy.Programmed > 0 && ns.Agent.Programmed > 0
		}
		return all && doneCreating, nil
	})
	if err != nil {
		return fmt.Errorf("%d Services not programmed everywhere %s after the first creation: %w (%s)", n, time.Since(start).Round(time.Second), err, scaleState(res))
	}
	for _, ns := range res.Nodes {
		progress("scale %d on %s: programmed agent %s (CPU %.2f s, RSS %.1f MiB), kube-proxy %s (CPU %.2f s, RSS %.1f MiB), node proxy CPU %.2f s RSS %.1f MiB",
			n, ns.Node, ns.Agent.Programmed.Round(time.Second), ns.Agent.CPUSeconds, mibF(ns.Agent.RSS),
			ns.KubeProxy.Programmed.Round(time.Second), ns.KubeProxy.CPUSeconds, mibF(ns.KubeProxy.RSS), ns.NodeProxy.CPUSeconds, mibF(ns.NodeProxy.RSS))
	}

	if cfg.scaleChanges > 0 {
		lat, err := measureChanges(ctx, suite.w, cfg.scaleChanges, n)
		if err != nil {
			return fmt.Errorf("endpoint change at %d Services: %w", n, err)
		}
		res.Latency = lat
	}
	if err := snapshotSizes(ctx, res, base); err != nil {
		return err
	}
	if !cfg.restarts {
		res.Notes = append(res.Notes, "restarts not measured at this size (SVCLB_PERF_RESTARTS=0)")
		return nil
	}
	return restarts(ctx, res, base)
}

func mibF(b uint64) float64 { return float64(b) / (1 << 20) }

// programmed records that proc on node holds everything now: the time since
// start, its CPU since before (same process) and its memory.
func programmed(ctx context.Context, node, proc string, start time.Time, before nodestat.Sample, side *result.Side) error {
	s, err := readProc(ctx, node, proc)
	if err != nil {
		return err
	}
	side.Programmed = time.Since(start)
	if s.PID != before.PID {
		return fmt.Errorf("%s on %s restarted (pid %d, was %d) while programming", proc, node, s.PID, before.PID)
	}
	side.CPUSeconds = (s.CPU - before.CPU).Seconds()
	side.RSS, side.HWM = s.RSS, s.HWM
	return nil
}

func scaleState(res *result.Scale) string {
	var parts []string
	for _, ns := range res.Nodes {
		parts = append(parts, fmt.Sprintf("%s: agent %s, kube-proxy %s", ns.Node, doneOrNot(ns.Agent.Programmed), doneOrNot(ns.KubeProxy.Programmed)))
	}
	return strings.Join(parts, "; ")
}

func doneOrNot(d time.Duration) string {
	if d == 0 {
		return "not yet"
	}
	return "done at " + d.Round(time.Second).String()
}

// snapshotSizes reads each node proxy's config dump with endpoints in
// proactive CDS, switches to on-demand (only what the node's pods dialled:
// the latency clients' Services on their node) and reads it again, then
// switches back and waits until every node holds every Service again.
func snapshotSizes(ctx context.Context, res *result.Scale, base map[string]*nodeBase) error {
	for i := range res.Nodes {
		b, err := configDumpBytes(ctx, res.Nodes[i].Node)
		if err != nil {
			return err
		}
		res.Nodes[i].ProactiveBytes = b
	}
	if err := agent.SetConfig(ctx, suite.cluster, map[string]string{contract.KeyCDS: "on-demand"}); err != nil {
		return err
	}
	restored := false
	defer func() {
		if !restored {
			_ = agent.SetConfig(context.WithoutCancel(ctx), suite.cluster, map[string]string{contract.KeyCDS: "proactive"})
		}
	}()
	for i := range res.Nodes {
		node := res.Nodes[i].Node
		// Settled: the proxy holds what the agent serves in on-demand mode
		// (its clusters, plus the static xds_cluster), nothing warming.
		var last string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			pod, err := agent.PodOn(ctx, suite.cluster, node)
			if err != nil {
				return false, err
			}
			st, err := agent.Status(ctx, suite.cluster, pod)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			active, warming, err := proxyClusters(ctx, node)
			last = fmt.Sprintf("agent cds %s, %d clusters; proxy %d active, %d warming", st.CDS, st.Clusters, active, warming)
			return err == nil && string(st.CDS) == "on-demand" && warming == 0 && active == int64(st.Clusters)+1, nil
		})
		if err != nil {
			return fmt.Errorf("on-demand CDS on %s: %w (%s)", node, err, last)
		}
		b, err := configDumpBytes(ctx, node)
		if err != nil {
			return err
		}
		res.Nodes[i].OnDemandBytes = b
		progress("scale %d on %s: config dump %d KiB proactive, %d KiB on-demand (%s)", res.Services, node, res.Nodes[i].ProactiveBytes>>10, b>>10, last)
	}
	restored = true
	if err := agent.SetConfig(ctx, suite.cluster, map[string]string{contract.KeyCDS: "proactive"}); err != nil {
		return err
	}
	return waitProxies(ctx, res, base, 3*time.Minute)
}

// waitProxies waits until every node proxy holds every Service again.
func waitProxies(ctx context.Context, res *result.Scale, base map[string]*nodeBase, within time.Duration) error {
	for _, ns := range res.Nodes {
		want := base[ns.Node].clusters + int64(res.Services) + 1
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
			return proxyHolds(ctx, ns.Node, want), nil
		})
		if err != nil {
			active, warming, _ := proxyClusters(ctx, ns.Node)
			return fmt.Errorf("node proxy on %s: %d active (of %d), %d warming clusters: %w", ns.Node, active, want, warming, err)
		}
	}
	return nil
}

// settledClusters waits until node's proxy holds what its agent serves
// (the agent's clusters plus the static xds_cluster, none warming) and the
// agent's count holds still over a second, and returns that count: the base
// the size's Services add to. (Counting what the agent should serve from
// the apiserver's Services instead would assume every Service gets its
// clusters; a Service the agent skips would then hold the wait forever.)
func settledClusters(ctx context.Context, node string) (int64, error) {
	var last, prev int64 = -1, -2
	var why string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err := agent.PodOn(ctx, suite.cluster, node)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		st, err := agent.Status(ctx, suite.cluster, pod)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		active, warming, err := proxyClusters(ctx, node)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		prev, last = last, int64(st.Clusters)
		why = fmt.Sprintf("agent %d clusters (before: %d), proxy %d active, %d warming", last, prev, active, warming)
		return last == prev && warming == 0 && active == last+1, nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s not settled: %w (%s)", node, err, why)
	}
	return last, nil
}

// restarts restarts, on the backends' node (not the clients'), kube-proxy
// and then the node DaemonSet's pod with every object present, and times
// each from its new process's start until it has programmed everything:
// kube-proxy's first full sync, the new node proxy's clusters.
func restarts(ctx context.Context, res *result.Scale, base map[string]*nodeBase) error {
	c := suite.cluster
	node := c.Workers()[1].Name
	var ns *result.NodeScale
	for i := range res.Nodes {
		if res.Nodes[i].Node == node {
			ns = &res.Nodes[i]
		}
	}
	kp, err := restartPod(ctx, "kube-system", "k8s-app=kube-proxy", node, procKubeProxy, base[node].kubeProxy.PID)
	if err != nil {
		return err
	}
	ns.KubeProxyRestart, err = untilProgrammed(ctx, node, procKubeProxy, kp, func(ctx context.Context) (bool, error) {
		syncs, err := kubeProxyFullSyncs(ctx, node)
		if err != nil {
			return false, nil // not listening yet
		}
		got, err := kubeProxyServices(ctx, node, scaleNamespace)
		return err == nil && syncs >= 1 && got >= res.Services, nil
	})
	if err != nil {
		return fmt.Errorf("kube-proxy restarted on %s: %w", node, err)
	}
	ag, err := restartPod(ctx, contract.Namespace, "app.kubernetes.io/name="+contract.NodeDaemonSet, node, procAgent, base[node].agent.PID)
	if err != nil {
		return err
	}
	ns.AgentRestart, err = untilProgrammed(ctx, node, procAgent, ag, func(ctx context.Context) (bool, error) {
		return proxyHolds(ctx, node, base[node].clusters+int64(res.Services)+1), nil
	})
	if err != nil {
		return fmt.Errorf("node pod restarted on %s: %w", node, err)
	}
	progress("scale %d on %s, restarted: kube-proxy programmed in %s (CPU %.2f s), agent in %s (CPU %.2f s)", res.Services, node,
		ns.KubeProxyRestart.Programmed.Round(100*time.Millisecond), ns.KubeProxyRestart.CPUSeconds,
		ns.AgentRestart.Programmed.Round(100*time.Millisecond), ns.AgentRestart.CPUSeconds)
	// The node pod is back as a whole (the agents answer) before anything
	// else runs on the cluster.
	_, err = agent.Statuses(ctx, c)
	return err
}

// restartPod deletes the pod selected by selector on node and returns its
// successor's process proc once it runs (a pid other than old).
func restartPod(ctx context.Context, ns, selector, node, proc string, old int) (nodestat.Sample, error) {
	pods, err := suite.cluster.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nodestat.Sample{}, err
	}
	if len(pods.Items) != 1 {
		return nodestat.Sample{}, fmt.Errorf("%d pods %s on %s, want 1", len(pods.Items), selector, node)
	}
	if err := suite.cluster.CS.CoreV1().Pods(ns).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		return nodestat.Sample{}, err
	}
	var s nodestat.Sample
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		s, err = readProc(ctx, node, proc)
		return err == nil && s.PID != old, nil
	})
	if err != nil {
		return s, fmt.Errorf("%s on %s not restarted: %w", proc, node, err)
	}
	return s, nil
}

// untilProgrammed polls done and then reads proc: the time since its start
// and the CPU its new container has used.
func untilProgrammed(ctx context.Context, node, proc string, started nodestat.Sample, done func(context.Context) (bool, error)) (*result.Side, error) {
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, done); err != nil {
		return nil, err
	}
	at := time.Now()
	s, err := readProc(ctx, node, proc)
	if err != nil {
		return nil, err
	}
	if s.PID != started.PID {
		return nil, fmt.Errorf("%s restarted again (pid %d, was %d)", proc, s.PID, started.PID)
	}
	return &result.Side{Programmed: at.Sub(started.Started), CPUSeconds: s.CPU.Seconds(), RSS: s.RSS, HWM: s.HWM}, nil
}

// cleanupScale deletes a size's Services (many at once: the namespace
// controller deletes them one by one) and the namespace, and waits until
// every node's kube-proxy has dropped them.
func cleanupScale(ctx context.Context, n int) error {
	c := suite.cluster
	t0 := time.Now()
	rc := rest.CopyConfig(c.Client.RESTConfig())
	rc.QPS, rc.Burst = 500, 1000
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	svcs, err := kube.CoreV1().Services(scaleNamespace).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if svcs != nil && len(svcs.Items) > 0 {
		next := make(chan string)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for range 16 {
			wg.Go(func() {
				for name := range next {
					if err := kube.CoreV1().Services(scaleNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
		for _, s := range svcs.Items {
			next <- s.Name
		}
		close(next)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		progress("scale %d: %d Services deleted in %s", n, len(svcs.Items), time.Since(t0).Round(time.Second))
	}
	if err := deleteNamespace(ctx, c, scaleNamespace); err != nil {
		return err
	}
	for _, node := range c.Nodes {
		var got int
		err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			got, err = kubeProxyServices(ctx, node.Name, scaleNamespace)
			return err == nil && got == 0, nil
		})
		if err != nil {
			return fmt.Errorf("kube-proxy on %s still has %d Services: %w", node.Name, got, err)
		}
	}
	progress("scale %d: cleaned up in %s; %s", n, time.Since(t0).Round(time.Second), load())
	return nil
}
