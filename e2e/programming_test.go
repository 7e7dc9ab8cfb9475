package e2e

import (
	"context"
	"net"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/metrics"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

const (
	// kubeProxyProgMetric is kube-proxy's network programming histogram.
	kubeProxyProgMetric = "kubeproxy_network_programming_duration_seconds"
)

// programmingHistograms sums the agent's histogram over every agent, and
// kube-proxy's over every node.
func programmingHistograms(ctx context.Context) (a, kp metrics.Histogram, err error) {
	ms, err := agent.Scrape(ctx, suite.cluster)
	if err != nil {
		return a, kp, err
	}
	for _, m := range ms {
		a = a.Add(m.Histogram(agent.ProgrammingMetric, nil))
	}
	for _, n := range suite.cluster.Nodes {
		m, err := guard.KubeProxyMetrics(ctx, suite.cluster, n.Name)
		if err != nil {
			return a, kp, err
		}
		kp = kp.Add(m.Histogram(kubeProxyProgMetric, nil))
	}
	return a, kp, nil
}

// waitBothProgrammed waits until the Service's EndpointSlices list n ready
// endpoints, every node's kube-proxy dispatches to exactly those (its
// nftables service chains), and every node's proxy serves them
// (measure.WaitProgrammed): both sides have programmed the change, so each
// has observed it in its histogram.
func waitBothProgrammed(ctx context.Context, svc *corev1.Service, n int) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		l, err := suite.cluster.CS.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		g.Expect(err).NotTo(HaveOccurred())
		var ready []string
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					for _, a := range e.Addresses {
						ready = append(ready, net.JoinHostPort(a, strconv.Itoa(workload.EchoPort)))
					}
				}
			}
		}
		slices.Sort(ready)
		g.Expect(ready).To(HaveLen(n), "ready endpoints of %s", svc.Name)
		for _, node := range suite.cluster.Nodes {
			table, err := guard.KubeProxyTable(ctx, suite.cluster, node.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(guard.KubeProxyEndpoints(table, svc)).To(Equal(ready), "kube-proxy's endpoints of %s on %s", svc.Name, node.Name)
		}
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	_, err := measure.WaitProgrammed(ctx, suite.cluster, []measure.Dialled{measure.ServicePort(svc, 80)})
	Expect(err).NotTo(HaveOccurred())
}

// programming: the figure, not a leg: the same EndpointSlice changes measured
// by the agent and by kube-proxy on every node, side by side in report.md.
var _ = Describe("network programming latency", Ordered, Label("programming"), func() {
	It("compares the agent with kube-proxy for the same EndpointSlice changes", func(ctx SpecContext) {
		Expect(setAgentConfig(ctx, phases(true))).To(Succeed())
		svc, err := workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "prog", workload.Backends{Replicas: 1}, workload.ServiceOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The creation's own programming lands before the first scrape.
		waitBothProgrammed(ctx, svc, 1)
		a0, k0, err := programmingHistograms(ctx)
		Expect(err).NotTo(HaveOccurred())
		deps := suite.cluster.CS.AppsV1().Deployments(suite.legsNS)
		changes := 0
		for _, n := range []int32{2, 3, 2, 1, 2, 1} {
			d, err := deps.Get(ctx, "prog", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			d.Spec.Replicas = &n
			_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=prog", int(n), 2*time.Minute)
			Expect(err).NotTo(HaveOccurred())
			changes++
			waitBothProgrammed(ctx, svc, int(n))
		}
		a1, k1, err := programmingHistograms(ctx)
		Expect(err).NotTo(HaveOccurred())
		da, dk := a1.Sub(a0), k1.Sub(k0)
		p := &evidence.Programming{
			Changes:   changes,
			Agent:     evidence.Quantiles{Metric: agent.ProgrammingMetric, Count: da.Count, P50: da.Quantile(0.5), P99: da.Quantile(0.99)},
			KubeProxy: evidence.Quantiles{Metric: kubeProxyProgMetric, Count: dk.Count, P50: dk.Quantile(0.5), P99: dk.Quantile(0.99)},
			Note: "Summed over every node; quantiles are histogram bucket upper bounds (no interpolation). " +
				"Each scale step changes the Service's EndpointSlice at least twice (pod created not ready, then ready).",
		}
		Expect(suite.evidence.WriteProgramming(p)).To(Succeed())
		progress("programming: agent p50 %.3fs p99 %.3fs (%g samples); kube-proxy p50 %.3fs p99 %.3fs (%g samples)",
			p.Agent.P50, p.Agent.P99, p.Agent.Count, p.KubeProxy.P50, p.KubeProxy.P99, p.KubeProxy.Count)
		Expect(da.Count).To(BeNumerically(">", 0), "the agent observed no programming of the changes (%s)", agent.ProgrammingMetric)
		Expect(dk.Count).To(BeNumerically(">", 0), "kube-proxy observed no programming of the changes (%s)", kubeProxyProgMetric)
	}, NodeTimeout(5*time.Minute))
})
