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
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// hostileCutDNSName is what every client resolves while kube-dns is cut.
const hostileCutDNSName = "kubernetes.default.svc.cluster.local."

// hostile-cut-dns: an operator labels kube-system/kube-dns for the guard. The meshed path
// serves TCP ports other than 53 only, so the guard cuts kube-dns' metrics port and leaves its
// UDP and TCP port 53 to kube-proxy: DNS keeps answering, for meshed pods and everyone else,
// and unlabelled, every entry is kube-proxy's again.
var _ = leg.Define(legs, leg.Leg[*corev1.Service]{
	Name:      "hostile-cut-dns",
	Control:   true,
	Workloads: "Service kube-system/kube-dns, labelled for the guard for the run and unlabelled after it; the meshed client on every node resolves a name over UDP and over TCP",
	Exercises: "pkg/kubeproxyguard (contract.MeshServes: only TCP ports other than 53 are cut; RestoreUnchosen), internal/capture/capture.go (TCP 53 returned unmarked)",
	Setup: fmt.Sprintf("kube-system/kube-dns labelled %s; the meshed client on every node resolves %s %d times over UDP and %d times over TCP; the label removed",
		"svclb.dev/kube-proxy=deleted", hostileCutDNSName, dnsLookups, dnsLookups),
	RedExpect: "same as green (control leg): the guard leaves UDP and TCP/53 to kube-proxy whatever the Phase flags",
	GreenMeans: "on every node the guard cuts kube-dns' TCP ports other than 53 and leaves its udp/53 and tcp/53 elements with kube-proxy's verdict; every lookup over UDP and over TCP answers; " +
		"once unlabelled, every node's kube-proxy table holds kube-dns' entries uncut again",
	Chance: fmt.Sprintf("nothing statistical: every lookup must answer within %s, the guard cut and restore within 60 s each", dnsTimeout),
	Prepare: func(ctx context.Context) (*corev1.Service, error) {
		svc, err := suite.cluster.CS.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get Service kube-system/kube-dns: %w", err)
		}
		return svc, nil
	},
	Measure: measureHostileCutDNS,
})

func measureHostileCutDNS(ctx context.Context, kubeDNS *corev1.Service, run *evidence.Run) {
	svc := kubeDNS.DeepCopy()
	if err := guard.Cut(ctx, suite.cluster, svc); err != nil {
		run.Error = err.Error()
		return
	}
	restored := false
	defer func() {
		if restored {
			return
		}
		// Whatever failed: DNS must not stay cut for the legs after this one.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := guard.Uncut(cctx, suite.cluster, svc); err != nil {
			run.Notes = append(run.Notes, "unlabel after a failure: "+err.Error())
		}
	}()
	if _, err := guard.WaitCut(ctx, suite.cluster, svc, time.Minute); err != nil {
		run.Error = err.Error()
		return
	}
	var kept, overcut []string
	for _, n := range suite.cluster.Nodes {
		table, err := guard.KubeProxyTable(ctx, suite.cluster, n.Name)
		if err != nil {
			run.Error = err.Error()
			return
		}
		k, c := guard.KubeProxyKept(table, svc)
		kept = append(kept, k...)
		for _, e := range c {
			overcut = append(overcut, n.Name+": "+e)
		}
	}
	dnsKept := 0
	for _, e := range kept {
		if strings.Contains(e, " . udp . 53 ") || strings.Contains(e, " . tcp . 53 ") {
			dnsKept++
		}
	}

	server := net.JoinHostPort(svc.Spec.ClusterIP, "53")
	opts := workload.DialOptions{Count: dnsLookups, Interval: 100 * time.Millisecond, Timeout: dnsTimeout}
	good := map[string]int{}
	var bad []string
	for i := range suite.clients {
		c := &suite.clients[i]
		for _, network := range []string{"udp", "tcp"} {
			rs, err := workload.Lookup(ctx, suite.cluster, c, hostileCutDNSName, network, opts)
			if err != nil {
				run.Error = err.Error()
				return
			}
			for _, r := range rs {
				run.Tally([]echo.Result{r.Result()}, suite.cluster.Zone)
				if r.OK && len(r.Addrs) > 0 && slices.Equal(r.Networks, []string{network}) && slices.Equal(r.Servers, []string{server}) {
					good[network]++
				} else if len(bad) < 3 {
					bad = append(bad, fmt.Sprintf("%s over %s: ok=%v addrs %v via %v %v %s %s", c.Spec.NodeName, network, r.OK, r.Addrs, r.Networks, r.Servers, r.Err, r.Detail))
				}
			}
		}
	}

	if err := guard.Uncut(ctx, suite.cluster, svc); err != nil {
		run.Error = err.Error()
		return
	}
	restored = true
	var back string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		back = ""
		for _, n := range suite.cluster.Nodes {
			table, err := guard.KubeProxyTable(ctx, suite.cluster, n.Name)
			if err != nil {
				back = err.Error()
				return false, nil
			}
			if len(guard.KubeProxyOnPath(table, svc)) == 0 {
				back = "kube-dns' TCP ports other than 53 still cut on " + n.Name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		back = fmt.Sprintf("not restored within 60 s: %s", back)
	}

	want := len(suite.clients) * dnsLookups
	run.MetGreen = len(overcut) == 0 && dnsKept == 2*len(suite.cluster.Nodes) && good["udp"] == want && good["tcp"] == want && err == nil
	run.MetRed = run.MetGreen
	restoredText := "restored on every node"
	if err != nil {
		restoredText = back
	}
	run.Summary = fmt.Sprintf("%s; with kube-dns labelled: udp/53 and tcp/53 kept on %d/%d nodes, %d elements cut that the guard must leave; %s: %d/%d over UDP, %d/%d over TCP via %s; unlabelled: %s",
		run.Counts(), dnsKept/2, len(suite.cluster.Nodes), len(overcut), hostileCutDNSName, good["udp"], want, good["tcp"], want, server, restoredText)
	if len(overcut) > 0 {
		run.Notes = append(run.Notes, "cut although the guard must leave them: "+strings.Join(overcut, "; "))
	}
	if len(bad) > 0 {
		run.Notes = append(run.Notes, "failed lookups (first 3): "+strings.Join(bad, "; "))
	}
}
