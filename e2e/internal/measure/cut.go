package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/metrics"
	"github.com/aether-mesh/svclb/pkg/kubeproxyguard"
)

// cutState is kube-proxy's hold on the cut Services a leg dials at one
// moment: per Service (namespace/name), its objects that route traffic in
// each node's `nft list table ip kube-proxy` (guard.KubeProxyOnPath: the
// kernel's answer) and the guard's re-deletion count of it on each node
// (the guard's record of every restore it undid, also between two
// readings).
type cutState struct {
	objects, redeletions map[string]map[string]int
	restoreExpected      map[string]bool
	// latency is each node's guard re-deletion latency histogram (every
	// Service of the node: the guard keeps one).
	latency map[string]metrics.Histogram
}

// cutServices are the dialled Services the suite's guard cuts (labelled
// for it, or in a namespace its namespace selector matches: the enroll
// leg), read from the apiserver.
func cutServices(ctx context.Context, c *cluster.Cluster, dialled []Dialled) ([]*corev1.Service, map[string]bool, error) {
	var out []*corev1.Service
	expected := map[string]bool{}
	for _, d := range dialled {
		k := d.serviceKey()
		if k == "" {
			continue
		}
		if _, seen := expected[k]; seen {
			expected[k] = expected[k] || d.RestartsKubeProxy
			continue
		}
		svc, err := c.CS.CoreV1().Services(d.Namespace).Get(ctx, d.Service, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // exists only during the leg's measure (new-service, range-grows)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("service %s: %w", k, err)
		}
		chosen, err := guard.Defaults().Chooses(ctx, c, svc)
		if err != nil {
			return nil, nil, err
		}
		if !chosen {
			continue // kube-proxy serves it on purpose (affinity)
		}
		expected[k] = d.RestartsKubeProxy
		out = append(out, svc)
	}
	return out, expected, nil
}

func readCut(ctx context.Context, c *cluster.Cluster, dialled []Dialled) (cutState, error) {
	st := cutState{objects: map[string]map[string]int{}, redeletions: map[string]map[string]int{}}
	svcs, expected, err := cutServices(ctx, c, dialled)
	if err != nil || len(svcs) == 0 {
		return st, err
	}
	st.restoreExpected = expected
	nodes := cluster.NodeNames(c.Nodes)
	var mu sync.Mutex
	err = concurrently(nodes, func(n string) error {
		onPath, err := onPathSettled(ctx, c, n, svcs)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for k, objs := range onPath {
			if st.objects[k] == nil {
				st.objects[k] = map[string]int{}
			}
			st.objects[k][n] = objs
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	// The guards' records are read after the tables settled (a restore the
	// guard undid meanwhile is counted), both at once.
	var sts map[string]kubeproxyguard.Status
	var ms map[string]metrics.Metrics
	var stErr, mErr error
	var wg sync.WaitGroup
	wg.Go(func() { sts, stErr = guard.Statuses(ctx, c) })
	wg.Go(func() { ms, mErr = guard.Metrics(ctx, c) })
	wg.Wait()
	if err := errors.Join(stErr, mErr); err != nil {
		return st, err
	}
	st.latency = map[string]metrics.Histogram{}
	for n, m := range ms {
		st.latency[n] = m.Histogram(guard.RedeletionLatencyMetric, nil)
	}
	for _, svc := range svcs {
		k := svc.Namespace + "/" + svc.Name
		st.redeletions[k] = map[string]int{}
		for _, n := range nodes {
			g, ok := sts[n]
			if !ok {
				return st, fmt.Errorf("no guard on %s", n)
			}
			ss, _ := guard.ServiceStatus(g, svc)
			st.redeletions[k][n] = ss.Redeletions
		}
	}
	return st, nil
}

// onPathSettled counts, per Service, its objects on kube-proxy's path in
// node's table. A reading that finds some is repeated until none are left
// or evidence.RestoreTolerance has passed: kube-proxy rewrites its objects
// on each sync and the guard cuts them again within milliseconds, so a
// reading can land between the two; only a restore the guard does not undo
// in time counts.
func onPathSettled(ctx context.Context, c *cluster.Cluster, node string, svcs []*corev1.Service) (map[string]int, error) {
	deadline := time.Now().Add(evidence.RestoreTolerance)
	for {
		table, err := guard.KubeProxyTable(ctx, c, node)
		if err != nil {
			return nil, err
		}
		out, any := map[string]int{}, false
		for _, svc := range svcs {
			n := len(guard.KubeProxyOnPath(table, svc))
			out[svc.Namespace+"/"+svc.Name] = n
			any = any || n > 0
		}
		if !any || time.Now().After(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cuts is the run's record of each cut Service: objects before (st) and
// after, and the guard's re-deletions in between.
func (st cutState) cuts(after cutState, dialled []Dialled) []evidence.Cut {
	var out []evidence.Cut
	for _, k := range serviceKeys(dialled) {
		before, ok := st.objects[k]
		if !ok {
			continue
		}
		c := evidence.Cut{Service: k, Before: before, After: after.objects[k], Redeletions: map[string]int{},
			SlowestRedeletion: map[string]float64{}, RestoreExpected: st.restoreExpected[k]}
		for n, r := range after.redeletions[k] {
			d := r - st.redeletions[k][n]
			if d == 0 {
				continue
			}
			c.Redeletions[n] = d
			// The guard's histogram is per node, not per Service: its
			// slowest re-deletion of any Service there bounds this one's.
			if h := after.latency[n].Sub(st.latency[n]); h.Count > 0 {
				c.SlowestRedeletion[n] = h.Quantile(1)
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b evidence.Cut) int {
		if a.Service < b.Service {
			return -1
		}
		if a.Service > b.Service {
			return 1
		}
		return 0
	})
	return out
}
