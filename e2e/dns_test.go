package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// dnsLookups is how many lookups each meshed client makes over each
// transport; dnsTimeout bounds one (Go's resolver retries within it).
const (
	dnsLookups = 5
	dnsTimeout = 5 * time.Second
)

type dnsWorkload struct {
	// name is target's fully qualified name; kubeDNS the Service that
	// answers (the pods' nameserver).
	name            string
	target, kubeDNS *corev1.Service
}

// dns: a meshed pod's DNS is none of svclb's business: the capture leaves
// port 53 alone (UDP is never captured, TCP 53 is excluded), so lookups go
// to kube-dns through kube-proxy whatever the Phase flags. Nothing it
// dials reaches a capture listener, so it declares no services: the
// evidence has no chain to check; the leg checks kube-dns' svc: cluster
// carried nothing.
var _ = leg.Define(legs, leg.Leg[*dnsWorkload]{
	Name:      "dns",
	Early:     true,
	Control:   true,
	Workloads: "Service dns; the meshed client on every node resolves its FQDN over UDP and over TCP",
	Exercises: "internal/capture/capture.go (outputRules: UDP never captured, TCP 53 returned unmarked); no agent code",
	Setup: fmt.Sprintf("a ClusterIP Service dns; the meshed client on every node resolves its fully qualified name through its resolv.conf nameserver (kube-dns), %d times over UDP and %d times over TCP",
		dnsLookups, dnsLookups),
	RedExpect: "same as green (control leg): port 53 is never captured",
	GreenMeans: "every lookup, over UDP and over TCP, went to kube-dns' ClusterIP:53 and answered the Service's ClusterIP; " +
		"no node proxy's svc: cluster of kube-dns:53 carried a connection (TCP 53 is not captured)",
	Chance: fmt.Sprintf("nothing statistical: every lookup must answer within %s (Go's resolver retries a lost UDP query within it)", dnsTimeout),
	Prepare: func(ctx context.Context) (*dnsWorkload, error) {
		svc := workload.Service(suite.legsNS, "dns", workload.ServiceOptions{})
		if err := suite.cluster.Create(ctx, svc); err != nil {
			return nil, err
		}
		// Create leaves an existing Service (a kept cluster) unread.
		got, err := suite.cluster.CS.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		kd, err := suite.cluster.CS.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get Service kube-system/kube-dns: %w", err)
		}
		return &dnsWorkload{name: fmt.Sprintf("%s.%s.svc.cluster.local.", got.Name, got.Namespace), target: got, kubeDNS: kd}, nil
	},
	Measure: measureDNS,
})

func measureDNS(ctx context.Context, w *dnsWorkload, run *evidence.Run) {
	clients := suite.clients
	nodes := clientNodes(clients)
	// kube-dns' TCP port 53 as a svc: cluster: what a captured lookup over
	// TCP would have gone through.
	stat := proxy.ClusterStat(contract.StatName(w.kubeDNS.Namespace, w.kubeDNS.Name, 53), proxy.UpstreamCxTotal)
	before, err := nodeStats(ctx, nodes)
	if err != nil {
		run.Error = err.Error()
		return
	}
	vip := w.target.Spec.ClusterIP
	server := net.JoinHostPort(w.kubeDNS.Spec.ClusterIP, "53")
	opts := workload.DialOptions{Count: dnsLookups, Interval: 100 * time.Millisecond, Timeout: dnsTimeout}
	good := map[string]int{} // per transport: lookups that answered vip, over it, from kube-dns
	var bad []string
	for i := range clients {
		c := &clients[i]
		for _, network := range []string{"udp", "tcp"} {
			rs, err := workload.Lookup(ctx, suite.cluster, c, w.name, network, opts)
			if err != nil {
				run.Error = err.Error()
				return
			}
			for _, r := range rs {
				run.Tally([]echo.Result{r.Result()}, suite.cluster.Zone)
				ok := r.OK && slices.Equal(r.Addrs, []string{vip}) && slices.Equal(r.Networks, []string{network}) && slices.Equal(r.Servers, []string{server})
				if ok {
					good[network]++
				} else if len(bad) < 3 {
					bad = append(bad, fmt.Sprintf("%s over %s: ok=%v addrs %v via %v %v %s %s", c.Spec.NodeName, network, r.OK, r.Addrs, r.Networks, r.Servers, r.Err, r.Detail))
				}
			}
		}
	}
	after, err := nodeStats(ctx, nodes)
	if err != nil {
		run.Error = err.Error()
		return
	}
	run.Counters = map[string]float64{}
	captured := int64(0)
	for _, n := range nodes {
		d := statDelta(before, after, n, stat)
		captured += d
		run.Counters[stat+" on "+n] = float64(d)
	}
	want := len(clients) * dnsLookups
	run.MetGreen = good["udp"] == want && good["tcp"] == want && captured == 0
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("%s; %s → %s: %d/%d over UDP, %d/%d over TCP, each via %s; %s +%d on the clients' nodes",
		run.Counts(), w.name, vip, good["udp"], want, good["tcp"], want, server, stat, captured)
	if len(bad) > 0 {
		run.Notes = append(run.Notes, "failed lookups (first 3): "+strings.Join(bad, "; "))
	}
}
