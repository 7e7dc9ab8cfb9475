package cniplugin

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"

	"github.com/aether-mesh/svclb/internal/enroll/enrolltest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// BenchmarkADD times the built plugin's ADD as the runtime runs it (exec, stdin, stdout), each
// in a fresh netns, for a pod that is enrolled (capture installed, listener bound by the fake
// agent) and one that is not (one round trip to the agent), and reports p50 and p99. The
// agent's own part on a node (sync, push, the proxy's bind) is not in it: the e2e figure is.
//
//	go test ./internal/cniplugin -run '^$' -bench ADD -benchtime 100x
func BenchmarkADD(b *testing.B) {
	bin := buildPlugin(b)
	agent := enrolltest.Start(b, &enrolltest.Agent{Decider: enrollMesh})
	for _, namespace := range []string{meshNS, "plain"} {
		b.Run("namespace="+namespace, func(b *testing.B) {
			var took []time.Duration
			for range b.N {
				ns := netnstest.New(b)
				conf := conf(agent.Socket, ns.Path(), "")
				args := &invoke.Args{Command: "ADD", ContainerID: "c0ffee", NetNS: ns.Path(), IfName: "eth0", Path: filepath.Dir(bin),
					PluginArgsStr: fmt.Sprintf("K8S_POD_NAMESPACE=%s;K8S_POD_NAME=web-0;K8S_POD_UID=uid-1", namespace)}
				start := time.Now()
				if _, err := invoke.ExecPluginWithResult(context.Background(), bin, conf, args, nil); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			p := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
			b.ReportMetric(p(0.5), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
		})
	}
}
