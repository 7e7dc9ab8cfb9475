package perf

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aether-mesh/svclb/e2e/perf/internal/slicewatch"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

const (
	// namespace holds everything the suite creates but the scale objects.
	namespace = "svclb-perf"
	// app is the backends' AppLabel; both Services select it.
	app = "perf-echo"
	// gate is the backends' readiness gate: a pod is Ready only while the
	// suite sets it True, so readiness flips without restarting anything.
	gate corev1.PodConditionType = "perf.svclb.dev/serving"
	// podA always serves; podX is the endpoint that comes and goes.
	podA, podX = "perf-a", "perf-x"
	// svcAgent is cut (guard.Label) and dialled by the meshed client;
	// svcKubeProxy, its twin, by the client that is not meshed.
	svcAgent, svcKubeProxy = "perf-agent", "perf-kube-proxy"
)

// latencyWorkload is what the latency measurements dial.
type latencyWorkload struct {
	meshed, plain *corev1.Pod // on the first worker
	// xIP is podX's address, what the EndpointSlices list.
	xIP                    string
	agentSvc, kubeProxySvc *corev1.Service
	slices                 *slicewatch.Watcher
}

func (w *latencyWorkload) agentTo() string     { return workload.Addr(w.agentSvc, 80) }
func (w *latencyWorkload) kubeProxyTo() string { return workload.Addr(w.kubeProxySvc, 80) }

// deployWorkload starts the EndpointSlice watch of the namespace, the two
// backends on the second worker (podA ready, podX not), the two clients on
// the first, and the two Services, and waits until both paths reach podA.
func deployWorkload(ctx context.Context, c *cluster.Cluster) (*latencyWorkload, error) {
	workers := c.Workers()
	if len(workers) < 2 {
		return nil, fmt.Errorf("%d workers: the suite needs two", len(workers))
	}
	clientNode, backendNode := workers[0].Name, workers[1].Name
	w := &latencyWorkload{slices: slicewatch.New()}
	watchCS, how, err := clockClient(c)
	if err != nil {
		return nil, err
	}
	progress("the clock's EndpointSlice watch: %s", how)
	// The watch outlives the setup step's context: it is the whole run's clock.
	if err := w.slices.Start(watchCtx, watchCS, namespace); err != nil {
		return nil, err
	}

	var backends []*corev1.Pod
	for _, name := range []string{podA, podX} {
		p := workload.EchoPod(namespace, name, app, workload.EchoPodOptions{})
		p.Spec.NodeName = backendNode
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
		backends = append(backends, p)
	}
	meshed, err := workload.MeshedClient(namespace, "perf-meshed", clientNode, "perf-meshed")
	if err != nil {
		return nil, err
	}
	plain := workload.PlainClient(namespace, "perf-plain", clientNode, "perf-plain")
	for _, p := range []*corev1.Pod{meshed, plain} {
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == workload.ClientContainer {
				p.Spec.Containers[i].Image = cfg.clientImage
			}
		}
	}
	if err := c.Create(ctx, backends[0], backends[1]); err != nil {
		return nil, err
	}
	clients, err := workload.Recreate(ctx, c, meshed, plain)
	if err != nil {
		return nil, err
	}
	w.meshed, w.plain = &clients[0], &clients[1]
	ips, err := waitServing(ctx, c, podA, podX)
	if err != nil {
		return nil, err
	}
	w.xIP = ips[1]
	if err := setGate(ctx, c, podA, true); err != nil {
		return nil, err
	}
	if err := setGate(ctx, c, podX, false); err != nil {
		return nil, err
	}

	sel := map[string]string{workload.AppLabel: app}
	if w.agentSvc, err = c.CreateService(ctx, workload.Service(namespace, svcAgent, workload.ServiceOptions{Selector: sel, Cut: true}), time.Minute); err != nil {
		return nil, err
	}
	if w.kubeProxySvc, err = c.CreateService(ctx, workload.Service(namespace, svcKubeProxy, workload.ServiceOptions{Selector: sel}), time.Minute); err != nil {
		return nil, err
	}
	note, err := guard.WaitCut(ctx, c, w.agentSvc, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	progress("%s", note)
	return w, nil
}

// waitServing waits until the named backends run with their echo container
// ready (the pods themselves wait for the gate) and returns their IPs.
func waitServing(ctx context.Context, c *cluster.Cluster, names ...string) ([]string, error) {
	ips := make([]string, len(names))
	for i, name := range names {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.CS.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = cluster.PodState(p)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready && p.Status.PodIP != "" {
					ips[i] = p.Status.PodIP
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("backend %s not serving: %w (%s)", name, err, last)
		}
	}
	return ips, nil
}

// setGate sets a backend's readiness gate; the kubelet then sets the pod's
// Ready, and the EndpointSlice controller both Services' slices.
func setGate(ctx context.Context, c *cluster.Cluster, pod string, on bool) error {
	status := corev1.ConditionFalse
	if on {
		status = corev1.ConditionTrue
	}
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"lastTransitionTime":%q}]}}`,
		gate, status, time.Now().UTC().Format(time.RFC3339))
	_, err := c.CS.CoreV1().Pods(namespace).Patch(ctx, pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("readiness gate of %s to %s: %w", pod, status, err)
	}
	return nil
}

// kindAPIServerPort is the port kind's apiserver listens on in its
// control-plane container; the kubeconfig names a host port docker forwards
// to it.
const kindAPIServerPort = 6443

// clockClient is the clientset of the clock's watch. It connects to the
// apiserver's container directly, the way the agents' watches do, at the
// control plane's node address (kind's serving certificate names it), not
// through the host port, where docker's userland proxy adds a hop and a
// process to schedule on a loaded machine. Where that address cannot be
// reached (Docker Desktop), it is the suite's own client.
func clockClient(c *cluster.Cluster) (kubernetes.Interface, string, error) {
	var ip string
	for _, n := range c.Nodes {
		if !strings.Contains(n.Name, "worker") {
			ip = n.InternalIP
		}
	}
	if ip == "" {
		return c.CS, "through the kubeconfig's address (no control-plane node address)", nil
	}
	rc := rest.CopyConfig(c.Client.RESTConfig())
	rc.Host = "https://" + net.JoinHostPort(ip, strconv.Itoa(kindAPIServerPort))
	rc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", err
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return c.CS, fmt.Sprintf("through the kubeconfig's address (%s unreachable: %v)", rc.Host, err), nil
	}
	rc.Timeout = 0 // a watch
	cs, err = kubernetes.NewForConfig(rc)
	return cs, "straight to the apiserver's container at " + rc.Host, err
}
