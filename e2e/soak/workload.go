package soak

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// Namespace holds everything the soak deploys besides the node DaemonSet
// and the guard.
const Namespace = "svclb-soak"

// The load's targets: four guarded Services (one Deployment of echo
// backends each) and one backend pod's own address, outside the Service
// range (the passthrough chain, Phase 0's other side).
const (
	TargetRoll     = "roll"     // the rolling restart's Deployment
	TargetScale    = "scale"    // scaled to 0 and back
	TargetRecreate = "recreate" // its Service is deleted and created again
	TargetSteady   = "steady"   // nothing happens to it
	TargetDirect   = "direct"   // a steady backend's pod IP
)

// backends are the Deployments behind the Service targets.
var backends = []struct {
	name     string
	replicas int32
}{{TargetRoll, 3}, {TargetScale, 2}, {TargetRecreate, 2}, {TargetSteady, 2}}

// DelayShutdown keeps a deleted backend serving, not ready, this long: the
// time its endpoint has to leave every node proxy's load assignment before
// the backend stops accepting (a preStop delay, as real workloads set). It
// outlasts the readiness probe's failure threshold (below) and the
// EndpointSlice's way to every node, on a loaded machine.
const DelayShutdown = 20 * time.Second

// The backends' readiness: a probe a second, 3 s to answer, 5 failures in
// a row to go unready. The fixture's own probe (one failure of 1 s) flipped
// both backends of an untouched Service unready during a 3-s stall of this
// machine, and every proxy then refused no-endpoints, as kube-proxy would:
// Kubernetes doing what it was told, not a fault of the data plane.
const (
	readyPeriod    = 1
	readyTimeout   = 3
	readyThreshold = 5
)

// loadClient is the role label of the load clients.
const loadClient = "load"

// workloads is what the soak deployed.
type workloads struct {
	services map[string]*corev1.Service
	direct   string // pod IP:port of a steady backend
	clients  []corev1.Pod
	scan     *corev1.Pod
	// firstConn are the Services each cycle's first-connection probe dials
	// first: created a cycle ahead, so every agent knows them.
	firstConn [][]*corev1.Service
}

// deployBackends deploys the Service targets' backends and Services, at once,
// and waits until every backend is Ready and the guard cut every Service.
func deployBackends(ctx context.Context, c *cluster.Cluster) (map[string]*corev1.Service, error) {
	out := map[string]*corev1.Service{}
	var objs []client.Object
	for _, b := range backends {
		dep := workload.EchoDeployment(Namespace, b.name, workload.Backends{Replicas: b.replicas, DelayShutdown: DelayShutdown})
		p := dep.Spec.Template.Spec.Containers[0].ReadinessProbe
		p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold = readyPeriod, readyTimeout, readyThreshold
		svc := workload.Service(Namespace, b.name, workload.ServiceOptions{Selector: dep.Spec.Selector.MatchLabels, Cut: true})
		objs = append(objs, dep, svc)
		out[b.name] = svc
	}
	if err := c.Create(ctx, objs...); err != nil {
		return nil, err
	}
	for _, b := range backends {
		if _, err := c.WaitPodsReady(ctx, Namespace, workload.AppLabel+"="+b.name, int(b.replicas), 3*time.Minute); err != nil {
			return nil, err
		}
	}
	var svcs []*corev1.Service
	for _, b := range backends {
		svcs = append(svcs, out[b.name])
	}
	return out, waitCutAll(ctx, c, svcs, 2*time.Minute)
}

// createFirstConn creates n guarded Services selecting the steady backends,
// named for cycle, and waits until the guard has cut them all.
func createFirstConn(ctx context.Context, c *cluster.Cluster, steady *corev1.Service, cycle, n int) ([]*corev1.Service, error) {
	var out []*corev1.Service
	for i := range n {
		svc := workload.Service(Namespace, fmt.Sprintf("fc-%d-%02d", cycle, i), workload.ServiceOptions{Selector: steady.Spec.Selector, Cut: true})
		if err := c.Create(ctx, svc); err != nil {
			return nil, err
		}
		out = append(out, svc)
	}
	return out, waitCutAll(ctx, c, out, 2*time.Minute)
}

// waitCutAll waits until every node's guard reports each Service clean
// and kube-proxy's table holds no ClusterIP entry of it (its chains and
// NodePort path stay): guard.WaitCut for many Services, reading each node
// once per round.
func waitCutAll(ctx context.Context, c *cluster.Cluster, svcs []*corev1.Service, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		last, err := notCut(ctx, c, svcs)
		if err == nil && last == "" {
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Services not cut everywhere within %s: %s", len(svcs), timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func notCut(ctx context.Context, c *cluster.Cluster, svcs []*corev1.Service) (string, error) {
	sts, err := guard.Statuses(ctx, c)
	if err != nil {
		return "", err
	}
	for _, n := range c.Nodes {
		table, err := guard.KubeProxyTable(ctx, c, n.Name)
		if err != nil {
			return "", err
		}
		for _, svc := range svcs {
			ss, ok := guard.ServiceStatus(sts[n.Name], svc)
			if !ok || ss.State != "clean" {
				return fmt.Sprintf("guard on %s: %s state %q", n.Name, svc.Name, ss.State), nil
			}
			if objs := guard.KubeProxyOnPath(table, svc); len(objs) > 0 {
				return fmt.Sprintf("nft on %s still has %s: %s", n.Name, svc.Name, objs[0]), nil
			}
		}
	}
	return "", nil
}

// loadArgs are the load client's arguments: every target, by DNS name
// (re-resolved every second) for the Services, by address for direct.
func loadArgs(cfg Settings, direct string, run time.Duration) []string {
	args := []string{"load"}
	for _, b := range backends {
		args = append(args, "-target="+b.name+"="+net.JoinHostPort(b.name+"."+Namespace+".svc.cluster.local.", "80"))
	}
	args = append(args, "-target="+TargetDirect+"="+direct,
		"-rate="+strconv.FormatFloat(cfg.Rate, 'f', -1, 64), "-long="+strconv.Itoa(cfg.Long),
		"-timeout="+cfg.Timeout.String(), "-duration="+run.String())
	return args
}

// targets are every target's name, in the load's order.
func targets() []string {
	var out []string
	for _, b := range backends {
		out = append(out, b.name)
	}
	return append(out, TargetDirect)
}

// deployClients starts one load client on each worker and the scan pod on
// the first, and waits until they are Ready (the capture's init container
// waits for the node proxy's listener).
func deployClients(ctx context.Context, c *cluster.Cluster, args []string) ([]corev1.Pod, *corev1.Pod, error) {
	var pods []*corev1.Pod
	for _, w := range c.Workers() {
		p, err := workload.MeshedClient(Namespace, "load-"+w.Name, w.Name, loadClient)
		if err != nil {
			return nil, nil, err
		}
		p.Spec.Containers[0].Args = args
		pods = append(pods, p)
	}
	scan, err := workload.MeshedClient(Namespace, "scan", c.Workers()[0].Name, "scan")
	if err != nil {
		return nil, nil, err
	}
	if err := c.Create(ctx, append(podObjects(pods), scan)...); err != nil {
		return nil, nil, err
	}
	clients, err := c.WaitPodsReady(ctx, Namespace, workload.RoleLabel+"="+loadClient, len(pods), 3*time.Minute)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(clients, func(a, b corev1.Pod) int { return strings.Compare(a.Spec.NodeName, b.Spec.NodeName) })
	sp, err := c.WaitPodsReady(ctx, Namespace, workload.RoleLabel+"=scan", 1, 3*time.Minute)
	if err != nil {
		return nil, nil, err
	}
	return clients, &sp[0], nil
}

// backendPods are the live (not terminating) pods of Deployment name.
func backendPods(ctx context.Context, c *cluster.Cluster, name string) ([]corev1.Pod, error) {
	l, err := c.CS.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: workload.AppLabel + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", name, err)
	}
	return l.Items, nil
}

func podObjects(pods []*corev1.Pod) []client.Object {
	out := make([]client.Object, len(pods))
	for i, p := range pods {
		out[i] = p
	}
	return out
}
