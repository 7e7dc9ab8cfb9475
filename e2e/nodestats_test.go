package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/proxy"
)

// Counter deltas a leg reads itself, around its own dials, where it needs
// more than the evidence's per-node checks (measure.Probe): an exact rise
// (attribution, phase0-split), a stat of a Service the leg creates while it
// measures (new-service), or an outlier stat.

// nodeStats reads the node proxy's /stats on each of nodes, at once.
func nodeStats(ctx context.Context, nodes []string) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	errs := make([]error, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			st, err := proxy.Stats(ctx, suite.cluster, n)
			mu.Lock()
			defer mu.Unlock()
			out[n], errs[i] = st, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// statDelta is after − before of stat on node (a stat never touched reads 0).
func statDelta(before, after map[string]map[string]int64, node, stat string) int64 {
	return after[node][stat] - before[node][stat]
}

// deltaNote spells the deltas of stats on nodes as "stat: node +n, …".
func deltaNote(before, after map[string]map[string]int64, nodes []string, stats ...string) string {
	var parts []string
	for _, s := range stats {
		var per []string
		for _, n := range nodes {
			per = append(per, fmt.Sprintf("%s %+d", n, statDelta(before, after, n, s)))
		}
		parts = append(parts, s+": "+strings.Join(per, ", "))
	}
	return strings.Join(parts, "; ")
}

// clientNodes are the nodes of clients, sorted.
func clientNodes(clients []corev1.Pod) []string {
	out := make([]string, len(clients))
	for i := range clients {
		out[i] = clients[i].Spec.NodeName
	}
	slices.Sort(out)
	return out
}
