package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// growsCIDRName names the ServiceCIDR the leg adds. Its range is the first of growsCandidates
// that overlaps no ServiceCIDR, no node's pod range and no node address of the cluster
// (freeGrowsCIDR): the first is outside kindconfig/cluster.yaml's Service (10.96.0.0/16) and pod
// (10.244.0.0/16) ranges and the kind network, but inside kubeadm's default Service range
// (10.96.0.0/12), where the others serve.
const growsCIDRName = "svclb-e2e-grows"

var growsCandidates = []netip.Prefix{
	netip.MustParsePrefix("10.97.0.0/24"),
	netip.MustParsePrefix("10.200.0.0/24"),
	netip.MustParsePrefix("10.254.250.0/24"),
}

// growsService is the Service each run creates in the range, at growsHost of it, port 80, and
// deletes after: one address for both runs, so what the leg dials is declared once.
const (
	growsService = "grows"
	growsHost    = 10
)

type rangeGrowsWorkload struct {
	selector map[string]string
	cidr     netip.Prefix   // the ServiceCIDR's range
	vip      netip.AddrPort // the Service's ClusterIP and port, in cidr
}

// range-grows: a ServiceCIDR added while everything runs widens the Service
// range the capture listeners send to cap_svc, and a Service allocated from
// it is served like any other, with nothing restarted.
var _ = leg.Define(legs, leg.Leg[*rangeGrowsWorkload]{
	Name: "range-grows",
	Workloads: "per run ServiceCIDR svclb-e2e-grows (the first /24 of 10.97.0.0, 10.200.0.0, 10.254.250.0 that overlaps no ServiceCIDR, " +
		"pod range or node address) added, then Service grows (2 echo backends, cut, ClusterIP its .10); clients on every node; both deleted after the run",
	Exercises: "pkg/svcindex/index.go and ranges.go (ServiceCIDR informer, Range), internal/translate/listener.go (the Service-range trie " +
		"matcher), the node proxy's listener update in place (nodeproxy/listeners.go)",
	Setup: fmt.Sprintf("per run: ServiceCIDR %s (a free /24) added at runtime, then a Service (2 echo backends, cut) with its ClusterIP in it; "+
		"a meshed client on every node dials it once every node proxy's capture listener routes the new range; ServiceCIDR and Service deleted after the run", growsCIDRName),
	RedExpect: "no backend reply (the passthrough to the VIP meets no kube-proxy rule)",
	Chance:    allSucceed + "; the range's growth is waited for on every proxy (its capture listener and the svc: cluster) before any dial",
	GreenMeans: "every attempt from every client gets a reply through its node proxy's " + contract.ChainSvc + " chain (tcp." + contract.ChainSvc +
		".downstream_cx_total and the Service's svc: cluster upstream_cx_total rise by the attempts on each client's node), and no agent, proxy, guard or kube-proxy container restarted",
	Prepare: func(ctx context.Context) (*rangeGrowsWorkload, error) {
		w := &rangeGrowsWorkload{}
		// What an interrupted run on a kept cluster left behind.
		if err := cleanupGrows(ctx, true); err != nil {
			return nil, err
		}
		cidr, err := freeGrowsCIDR(ctx)
		if err != nil {
			return nil, err
		}
		w.cidr = cidr
		w.vip = netip.AddrPortFrom(nthAddr(cidr, growsHost), 80)
		dep := workload.EchoDeployment(suite.legsNS, "grows", workload.Backends{Replicas: 2})
		if err := suite.cluster.Create(ctx, dep); err != nil {
			return nil, err
		}
		if _, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=grows", 2, 2*time.Minute); err != nil {
			return nil, err
		}
		w.selector = dep.Spec.Selector.MatchLabels
		return w, nil
	},
	Services: func(w *rangeGrowsWorkload) []measure.Dialled {
		return []measure.Dialled{{To: w.vip.String(), Namespace: suite.legsNS, Service: growsService}}
	},
	Measure: func(ctx context.Context, w *rangeGrowsWorkload, run *evidence.Run) {
		err := measureRangeGrows(ctx, w, run)
		if cerr := cleanupGrows(context.WithoutCancel(ctx), false); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
		if err != nil && run.Error == "" {
			run.Error = err.Error()
		}
	},
})

// cleanupGrows deletes the leg's Service, then its ServiceCIDR: the
// apiserver keeps a ServiceCIDR while an address of it is held. It waits
// until the ServiceCIDR is gone only when wait is set: the apiserver removes
// a deleted ServiceCIDR after a grace period (about 10 s on this cluster),
// which a run's own cleanup need not spend; the next creation waits for it
// (measureRangeGrows), and so does prepare on a kept cluster.
func cleanupGrows(ctx context.Context, wait bool) error {
	if err := suite.cluster.DeleteService(ctx, suite.legsNS, growsService, time.Minute); err != nil {
		return err
	}
	if !wait {
		err := suite.cluster.CS.NetworkingV1().ServiceCIDRs().Delete(ctx, growsCIDRName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ServiceCIDR %s: %w", growsCIDRName, err)
		}
		return nil
	}
	return suite.cluster.DeleteServiceCIDR(ctx, growsCIDRName, 2*time.Minute)
}

// freeGrowsCIDR is the first of growsCandidates that overlaps no ServiceCIDR, no node's pod
// range and no node address: the leg would prove nothing in a range already served, and
// would shadow real addresses in one in use.
func freeGrowsCIDR(ctx context.Context) (netip.Prefix, error) {
	var taken []string
	scs, err := suite.cluster.CS.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	for _, sc := range scs.Items {
		taken = append(taken, sc.Spec.CIDRs...)
	}
	nodes, err := suite.cluster.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		taken = append(taken, n.Spec.PodCIDRs...)
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				taken = append(taken, netip.PrefixFrom(ip, ip.BitLen()).String())
			}
		}
	}
	return firstFree(growsCandidates, taken)
}

// firstFree is the first of candidates that overlaps none of taken (prefixes; what does not
// parse is skipped).
func firstFree(candidates []netip.Prefix, taken []string) (netip.Prefix, error) {
	for _, c := range candidates {
		free := true
		for _, s := range taken {
			if p, err := netip.ParsePrefix(s); err == nil && p.Overlaps(c) {
				free = false
				break
			}
		}
		if free {
			return c, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("every candidate range %v overlaps a ServiceCIDR, pod range or node address in use (%v)", candidates, taken)
}

// nthAddr is the n-th address of p (its first is 0).
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// restarts is the restart count of every container of the pods that would
// have to restart to pick up a new range by force: the node DaemonSet (agent
// and proxy), the guard and kube-proxy, keyed by pod. A replaced pod shows
// as a key that changed.
func restarts(ctx context.Context) (map[string]int32, error) {
	var pods []corev1.Pod
	for _, list := range []func() ([]corev1.Pod, error){
		func() ([]corev1.Pod, error) { return agent.Pods(ctx, suite.cluster) },
		func() ([]corev1.Pod, error) { return guard.Pods(ctx, suite.cluster) },
		func() ([]corev1.Pod, error) {
			l, err := suite.cluster.CS.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
			if err != nil {
				return nil, fmt.Errorf("list kube-proxy pods: %w", err)
			}
			return l.Items, nil
		},
	} {
		ps, err := list()
		if err != nil {
			return nil, err
		}
		pods = append(pods, ps...)
	}
	out := map[string]int32{}
	for _, p := range pods {
		n := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
		out[p.Namespace+"/"+p.Name] = n
	}
	return out, nil
}

// growsReady says, for each client, which chain its capture listener gives
// vip, and whether what that chain needs is in place: cap_svc needs the
// Service's svc: cluster on the node's proxy. "" when all are ready.
func growsReady(ctx context.Context, clients []corev1.Pod, vip netip.Addr, cluster string) (map[string]string, string) {
	chains := map[string]string{}
	for _, c := range clients {
		node := c.Spec.NodeName
		d, err := proxy.ConfigDump(ctx, suite.cluster, node)
		if err != nil {
			return nil, err.Error()
		}
		l, err := proxy.Listener(d, contract.ListenerName(c.Namespace, c.Name))
		if err != nil || l == nil {
			return nil, fmt.Sprintf("%s: no listener for %s/%s (%v)", node, c.Namespace, c.Name, err)
		}
		chain, err := proxy.ChainFor(l, vip)
		if err != nil {
			return nil, err.Error()
		}
		chains[node] = chain
		switch chain {
		case contract.ChainPassthrough:
			return nil, fmt.Sprintf("%s: the listener of %s routes %s to %s: the range has not grown there", node, c.Name, vip, chain)
		case contract.ChainSvc:
			cl, err := proxy.Clusters(d)
			if err != nil {
				return nil, err.Error()
			}
			if !cl[cluster] {
				return nil, fmt.Sprintf("%s: %s routes %s to %s, but the proxy holds no %s yet", node, c.Name, vip, chain, cluster)
			}
		}
	}
	return chains, ""
}

func measureRangeGrows(ctx context.Context, w *rangeGrowsWorkload, run *evidence.Run) error {
	vip := w.vip
	clients := suite.clients
	nodes := clientNodes(clients)
	r0, err := restarts(ctx)
	if err != nil {
		return err
	}
	// The last run's ServiceCIDR may still be going (cleanupGrows).
	if err := suite.cluster.DeleteServiceCIDR(ctx, growsCIDRName, 2*time.Minute); err != nil {
		return err
	}
	t0 := time.Now()
	if err := suite.cluster.CreateServiceCIDR(ctx, growsCIDRName, w.cidr, time.Minute); err != nil {
		return err
	}
	cidrReady := time.Since(t0)
	svc := workload.Service(suite.legsNS, growsService, workload.ServiceOptions{Selector: w.selector, Cut: true,
		Mutate: func(s *corev1.Service) { s.Spec.ClusterIP = vip.Addr().String() }})
	// The allocator may learn of a Ready ServiceCIDR a moment after its status says so.
	created, err := suite.cluster.CreateService(ctx, svc, 30*time.Second)
	if err != nil {
		return err
	}
	if _, err := guard.WaitCut(ctx, suite.cluster, created, time.Minute); err != nil {
		return err
	}
	cluster := contract.ClusterName(vip.Addr(), vip.Port())
	var chains map[string]string
	var why string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		chains, why = growsReady(ctx, clients, vip.Addr(), cluster)
		return why == "", nil
	}); err != nil {
		return fmt.Errorf("the range did not grow on every client's node proxy: %w (%s)", err, why)
	}
	grown := time.Since(t0)
	// The proxies serve the new Service as their agents emit it.
	if _, err := measure.WaitProgrammed(ctx, suite.cluster, []measure.Dialled{measure.ServicePort(created, 80)}); err != nil {
		return err
	}
	if measure.FromEveryClient(ctx, suite.cluster, clients, vip.String(), workload.Quick, run) == nil {
		return nil // run.Error says why
	}
	r1, err := restarts(ctx)
	if err != nil {
		return err
	}
	throughSvc := true
	for _, n := range nodes {
		throughSvc = throughSvc && chains[n] == contract.ChainSvc
	}
	var restarted []string
	for _, k := range slices.Sorted(maps.Keys(r0)) {
		if n, ok := r1[k]; !ok || n != r0[k] {
			restarted = append(restarted, k)
		}
	}
	for k := range r1 {
		if _, ok := r0[k]; !ok {
			restarted = append(restarted, k+" (new)")
		}
	}
	chainList := make([]string, 0, len(chains))
	for _, n := range nodes {
		chainList = append(chainList, n+": "+chains[n])
	}
	run.Notes = append(run.Notes,
		fmt.Sprintf("ServiceCIDR %s (%s) Ready %.1fs after creation; every client's listener routed %s and the proxies held what that needs %.1fs after creation",
			growsCIDRName, w.cidr, cidrReady.Seconds(), vip.Addr(), grown.Seconds()),
		"chain for "+vip.Addr().String()+": "+strings.Join(chainList, ", "))
	if len(restarted) > 0 {
		run.Notes = append(run.Notes, "restarted or replaced during the run: "+strings.Join(restarted, ", "))
	}
	run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts && throughSvc && len(restarted) == 0
	run.MetRed = run.Attempts > 0 && run.Replies == 0
	run.Summary = fmt.Sprintf("%s to %s/%s (%s); the listeners route it to %s on every client's node: %v; restarted: %d",
		run.Counts(), suite.legsNS, growsService, vip, contract.ChainSvc, throughSvc, len(restarted))
	return nil
}

// TestFirstFree: the range-grows leg takes the first candidate that no range or address in use
// overlaps, skips what does not parse, and says so when every candidate is taken.
func TestFirstFree(t *testing.T) {
	c := []netip.Prefix{netip.MustParsePrefix("10.97.0.0/24"), netip.MustParsePrefix("10.200.0.0/24")}
	for _, tc := range []struct {
		taken []string
		want  string
	}{
		{[]string{"10.96.0.0/16", "10.244.0.0/16", "172.18.0.2/32"}, "10.97.0.0/24"},
		{[]string{"10.96.0.0/12", "garbage"}, "10.200.0.0/24"}, // kubeadm's default Service range holds the first
		{[]string{"10.0.0.0/8"}, ""},
	} {
		got, err := firstFree(c, tc.taken)
		if tc.want == "" {
			if err == nil {
				t.Errorf("taken %v: got %s, want an error", tc.taken, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("taken %v: %s, %v; want %s", tc.taken, got, err, tc.want)
		}
	}
	if a := nthAddr(netip.MustParsePrefix("10.200.0.0/24"), 10); a.String() != "10.200.0.10" {
		t.Errorf("nthAddr = %s", a)
	}
}
