package perf

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/perf/internal/slicewatch"
	"github.com/aether-mesh/svclb/e2e/perf/internal/traffic"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// newServiceWithin bounds a trial: both paths program a new Service in
// about a second; a loaded machine has taken a few.
const newServiceWithin = time.Minute

// TestNewService: trials times, a Service (cut, dialled by the meshed
// client) and its twin (dialled by the other client) are created at once at
// addresses both clients already dial, selecting the backends; each path's
// time runs from its Service's first EndpointSlice event with a ready
// endpoint (and, apart, from just before its Create) to its first reply.
func TestNewService(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	c, w := suite.cluster, suite.w
	res := &result.NewService{Header: header(), Interval: cfg.interval}
	ips, err := c.FreeServiceIPs(ctx, 2*cfg.trials)
	if err != nil {
		t.Fatal(err)
	}
	var fromSlice, fromCreate [2][]float64
	var failed []bool
	kpNode := w.plain.Spec.NodeName
	for i := range cfg.trials {
		sides := []struct {
			name   string
			client *corev1.Pod
			cut    bool
		}{{fmt.Sprintf("new-%02d", i), w.meshed, true}, {fmt.Sprintf("new-%02d-twin", i), w.plain, false}}
		streams := make([]*traffic.Stream, 2)
		svcs := make([]*corev1.Service, 2)
		for j, s := range sides {
			svcs[j] = workload.Service(namespace, s.name, workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: app}, Cut: s.cut})
			svcs[j].Spec.ClusterIP = ips[2*i+j].String()
			if streams[j], err = dial(ctx, s.client, workload.Addr(svcs[j], 80), newServiceWithin, true); err != nil {
				t.Fatal(err)
			}
		}
		failures, err := kubeProxySyncFailures(ctx, kpNode)
		if err != nil {
			t.Fatal(err)
		}
		// Both at once: neither path waits for the other's creation.
		var created [2]time.Time
		var errs [2]error
		var wg sync.WaitGroup
		for j := range svcs {
			wg.Go(func() {
				created[j] = time.Now()
				_, errs[j] = c.CreateService(ctx, svcs[j], 30*time.Second)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for j, s := range sides {
			var first time.Time
			err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, newServiceWithin, true, func(context.Context) (bool, error) {
				rs, done, err := streams[j].Attempts()
				var ok bool
				if first, ok = traffic.FirstAnyReply(rs, created[j]); ok {
					return true, nil
				}
				if done {
					return false, fmt.Errorf("no reply before the client ended (%v): %s", err, summarize(rs))
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("trial %d, %s: %v", i+1, s.name, err)
			}
			var ev slicewatch.Observation
			err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, newServiceWithin, true, func(context.Context) (bool, error) {
				var ok bool
				ev, ok = w.slices.First(s.name, created[j], slicewatch.Any)
				return ok, w.slices.Err()
			})
			if err != nil {
				t.Fatalf("trial %d, %s: no EndpointSlice with a ready endpoint: %v", i+1, s.name, err)
			}
			fromSlice[j] = append(fromSlice[j], traffic.Ms(first.Sub(ev.At)))
			fromCreate[j] = append(fromCreate[j], traffic.Ms(first.Sub(created[j])))
		}
		after, err := kubeProxySyncFailures(ctx, kpNode)
		if err != nil {
			t.Fatal(err)
		}
		failed = append(failed, after > failures)
		for _, s := range sides {
			if err := c.DeleteService(ctx, namespace, s.name, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 || (i+1)%5 == 0 {
			n := len(fromSlice[0]) - 1
			progress("new Service %d/%d: first reply %.0f ms (agent) / %.0f ms (kube-proxy) after the slice event, %.0f / %.0f ms after Create",
				i+1, cfg.trials, fromSlice[0][n], fromSlice[1][n], fromCreate[0][n], fromCreate[1][n])
		}
	}
	res.FromSlice = result.NewPair(fromSlice[0], fromSlice[1], failed)
	res.FromCreate = result.NewPair(fromCreate[0], fromCreate[1], failed)
	finish(&res.Header)
	r := res.FromSlice.Ratios(res.Interval)
	progress("new Service: p50 %.0f/%.0f ms (%s), p99 %.0f/%.0f ms (%s) from the slice event; %s",
		res.FromSlice.Agent.P50, res.FromSlice.KubeProxy.P50, r[0], res.FromSlice.Agent.P99, res.FromSlice.KubeProxy.P99, r[2], res.LoadAfter)
	if err := result.Write(cfg.Artifacts, result.NewServiceFile, res); err != nil {
		t.Fatal(err)
	}
}
