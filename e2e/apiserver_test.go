package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	// apiserverHandshakes is how many TLS handshakes each meshed client
	// makes; apiserverTimeout bounds one (connect and handshake).
	apiserverHandshakes = 5
	apiserverTimeout    = 5 * time.Second
	// apiserverName is a name the apiserver's serving certificate carries
	// (kubeadm's apiserver certificate SANs).
	apiserverName = "kubernetes.default.svc"
)

// apiserver: default/kubernetes stays kube-proxy's (the proposal's
// Non-goals): its VIP is a /32 the capture listener sends to
// cap_passthrough_svc whatever the Phase flags (the evidence checks that
// chain took every handshake, Dialled.KubeProxys), no node proxy holds a
// svc: cluster for it, and a meshed pod reaches the apiserver all the same.
var _ = leg.Define(legs, leg.Leg[*corev1.Service]{
	Name:      "apiserver",
	Early:     true,
	Control:   true,
	Workloads: "Service default/kubernetes; the meshed client on every node makes TLS handshakes with its ClusterIP:443",
	Exercises: "the agent's Service filter (default/kubernetes is not svclb's: no svc: cluster), internal/translate/listener.go (its VIP a /32 to " +
		"cap_passthrough_svc in both phases)",
	Setup: fmt.Sprintf("Service default/kubernetes (the apiserver); the meshed client on every node makes %d TLS handshakes with its ClusterIP:443",
		apiserverHandshakes),
	RedExpect: "same as green (control leg): the apiserver's Service is not svclb's",
	GreenMeans: "on each client's node tcp." + contract.ChainPassthroughSvc + ".downstream_cx_total rises by at least its handshakes; no node proxy's config_dump holds a svc: cluster " +
		"for default/kubernetes' ClusterIP; every handshake from every meshed client completes, the certificate verified for " + apiserverName + " against the pod's service-account CA",
	Chance: fmt.Sprintf("nothing statistical: every handshake must complete within %s (the apiserver answers in milliseconds; the bound is for a loaded machine)", apiserverTimeout),
	Prepare: func(ctx context.Context) (*corev1.Service, error) {
		svc, err := suite.cluster.CS.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get Service default/kubernetes: %w", err)
		}
		return svc, nil
	},
	Services: func(svc *corev1.Service) []measure.Dialled {
		d := measure.ServicePort(svc, 443)
		d.KubeProxys = true
		return []measure.Dialled{d}
	},
	Measure: measureAPIServer,
})

func measureAPIServer(ctx context.Context, svc *corev1.Service, run *evidence.Run) {
	to := workload.Addr(svc, 443)
	opts := workload.DialOptions{Count: apiserverHandshakes, Interval: 100 * time.Millisecond, Timeout: apiserverTimeout}
	subjects := map[string]bool{}
	var bad []string
	for i := range suite.clients {
		c := &suite.clients[i]
		rs, err := workload.Handshake(ctx, suite.cluster, c, to, apiserverName, opts)
		if err != nil {
			run.Error = err.Error()
			return
		}
		for _, r := range rs {
			run.Tally([]echo.Result{r.Result()}, suite.cluster.Zone)
			if r.OK {
				subjects[r.Subject] = true
			} else if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("%s: %s %s", c.Spec.NodeName, r.Err, r.Detail))
			}
		}
	}
	// Every node, not only the clients': no proxy may hold the cluster.
	vip, err := netip.ParseAddrPort(to)
	if err != nil {
		run.Error = fmt.Sprintf("default/kubernetes: %v", err)
		return
	}
	var holding []string
	for _, n := range suite.cluster.Nodes {
		d, err := proxy.ConfigDump(ctx, suite.cluster, n.Name)
		if err != nil {
			run.Error = err.Error()
			return
		}
		cl, err := proxy.Clusters(d)
		if err != nil {
			run.Error = err.Error()
			return
		}
		for name := range cl {
			if strings.HasPrefix(name, contract.ClusterPrefix+vip.Addr().String()+":") {
				holding = append(holding, name+" on "+n.Name)
			}
		}
	}
	slices.Sort(holding)
	run.MetGreen = run.Attempts > 0 && run.Replies == run.Attempts && len(holding) == 0
	run.MetRed = run.MetGreen
	held := "none"
	if len(holding) > 0 {
		held = strings.Join(holding, ", ")
	}
	run.Summary = fmt.Sprintf("%s (TLS handshakes with default/kubernetes at %s); svc: clusters for %s: %s", run.Counts(), to, vip.Addr(), held)
	if len(subjects) > 0 {
		run.Notes = append(run.Notes, "certificate subjects: "+strings.Join(slices.Sorted(maps.Keys(subjects)), ", "))
	}
	if len(bad) > 0 {
		run.Notes = append(run.Notes, "failed handshakes (first 3): "+strings.Join(bad, "; "))
	}
}
