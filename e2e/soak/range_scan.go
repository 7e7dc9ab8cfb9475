package soak

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// KindScan is the scan of the Service range.
const KindScan = "scan"

// rangeScan dials the first cfg.ScanHosts addresses of the Service range on
// cfg.ScanPorts from the scan pod, and checks that the node's snapshot grew
// by at most the Service ports it hit.
type rangeScan struct{}

func (rangeScan) Name() string { return KindScan }

func (rangeScan) Describe() string { return "another pod scans the Service range" }

func (rangeScan) Windows(Layout) []Window { return one("scan of the Service range") }

func (f rangeScan) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingFails(f)
}

func (f rangeScan) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) { return nothingCut(f) }

func (rangeScan) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	pod := r.wl.scan
	node := pod.Spec.NodeName
	w.Node = node
	b, err := r.c.NodeGet(ctx, node, contract.AgentPort, "/status")
	if err != nil {
		return err
	}
	st, err := agent.DecodeStatus(b)
	if err != nil {
		return err
	}
	if len(st.Range) == 0 {
		return fmt.Errorf("the agent on %s knows no Service range", node)
	}
	prefix, err := netip.ParsePrefix(st.Range[0])
	if err != nil {
		return err
	}
	sw := echo.SweepOptions{Prefix: prefix, Hosts: r.cfg.ScanHosts, Ports: r.cfg.ScanPorts}
	addrs, err := sw.Addresses()
	if err != nil {
		return err
	}
	known, err := r.knownPorts(ctx, addrs)
	if err != nil {
		return err
	}
	before, err := r.snapshot(ctx, "before scan", node)
	if err != nil {
		return err
	}
	var ports []string
	for _, p := range r.cfg.ScanPorts {
		ports = append(ports, strconv.Itoa(int(p)))
	}
	w.Start = time.Now()
	out, _, err := r.c.Exec(ctx, pod.Namespace, pod.Name, workload.ClientContainer, "/svclb-echo", "sweep",
		"-prefix="+prefix.String(), "-hosts="+strconv.Itoa(r.cfg.ScanHosts), "-ports="+strings.Join(ports, ","),
		"-parallel="+strconv.Itoa(r.cfg.ScanParallel), "-timeout="+r.cfg.Timeout.String())
	w.End = time.Now()
	if err != nil {
		return err
	}
	rs, err := workload.ParseDial(out)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.rec.Sweeps == nil {
		r.rec.Sweeps = map[string]Scan{}
	}
	r.rec.Sweeps[w.Name] = Scan{Node: node, Pod: pod.Name, Results: rs}
	r.mu.Unlock()
	after, err := r.snapshot(ctx, "after scan", node)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.rec.Figures.Snapshots = append(r.rec.Figures.Snapshots, before, after)
	r.rec.Figures.Bounds = append(r.rec.Figures.Bounds,
		Bound{What: "svc: clusters on " + node + " after the scan", OK: after.SvcClusters <= before.SvcClusters+known,
			Detail: fmt.Sprintf("%d before, %d after; bound %d = before + the %d Service ports among the %d addresses scanned", before.SvcClusters, after.SvcClusters, before.SvcClusters+known, known, len(addrs))},
		Bound{What: "on-demand pending names on " + node + " after the scan", OK: after.Pending <= min(before.Pending+len(addrs)*len(ports), contract.OnDemandPendingMax),
			Detail: fmt.Sprintf("%d before, %d after; bound %d = before + the %d names scanned, at most the pending cap %d (names past it are answered as missing)",
				before.Pending, after.Pending, min(before.Pending+len(addrs)*len(ports), contract.OnDemandPendingMax), len(addrs)*len(ports), contract.OnDemandPendingMax)})
	r.mu.Unlock()
	by := map[string]int{}
	for _, x := range rs {
		by[echo.Outcome(x)]++
	}
	w.notef("%d connections (%d addresses × %d ports, %d at once): %v; svc: clusters %d → %d, CDS+EDS %d → %d B, pending %d",
		len(rs), r.cfg.ScanHosts, len(r.cfg.ScanPorts), r.cfg.ScanParallel, by, before.SvcClusters, after.SvcClusters,
		before.CDSBytes+before.EDSBytes, after.CDSBytes+after.EDSBytes, after.Pending)
	return nil
}

// knownPorts counts the TCP Service ports (default/kubernetes aside) among
// addrs: what a scan of them may rightly admit.
func (r *runner) knownPorts(ctx context.Context, addrs []string) (int, error) {
	svcs, err := r.c.CS.CoreV1().Services(corev1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	set := map[string]bool{}
	for _, a := range addrs {
		set[a] = true
	}
	n := 0
	for _, s := range svcs.Items {
		if contract.IsAPIServerService(s.Namespace, s.Name) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Protocol == corev1.ProtocolTCP && set[net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port)))] {
				n++
			}
		}
	}
	return n, nil
}
