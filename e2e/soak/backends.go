package soak

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/internal/translate"
)

// waitReplaced waits until Deployment name runs n Ready pods, none of old
// is left (each served out its shutdown delay), and every node's proxy
// holds exactly the new pods.
func (r *runner) waitReplaced(ctx context.Context, w *Window, name string, n int, old []corev1.Pod) error {
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		all, err := backendPods(ctx, r.c, name)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = pods[:0]
		for _, p := range all {
			if slices.Contains(w.Pods, p.Name) {
				last = "old pod " + p.Name + " still there (" + cluster.PodState(&p) + ")"
				return false, nil
			}
			if p.DeletionTimestamp == nil && cluster.PodReady(&p) {
				pods = append(pods, p)
			}
		}
		last = fmt.Sprintf("%d of %d new pods Ready", len(pods), n)
		return len(pods) == n, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s: %w (%s)", name, err, last)
	}
	w.step("new pods Ready, old pods gone")
	if err := r.waitHolds(ctx, r.wl.services[name], pods); err != nil {
		return err
	}
	w.step("every node's proxy holds the new pods")
	return nil
}

// livePods are Deployment name's pods that are not being deleted.
func (r *runner) livePods(ctx context.Context, name string) ([]corev1.Pod, error) {
	all, err := backendPods(ctx, r.c, name)
	var out []corev1.Pod
	for _, p := range all {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, err
}

func podNames(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// waitHolds waits until every node's proxy holds exactly pods as the
// endpoints of svc's port 80 (none: an empty assignment): first until the
// Service's EndpointSlices select exactly them for every node
// (internal/translate, as the agent selects: ready endpoints, and serving
// terminating ones when none is ready), then until every proxy serves what
// its agent emits from those slices (measure.WaitProgrammed).
func (r *runner) waitHolds(ctx context.Context, svc *corev1.Service, pods []corev1.Pod) error {
	var want []string
	for _, p := range pods {
		want = append(want, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(workload.EchoPort)))
	}
	slices.Sort(want)
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 80 })
	if i < 0 {
		return fmt.Errorf("service %s has no port 80", svc.Name)
	}
	port := svc.Spec.Ports[i].Name
	var last string
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := r.c.CS.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var eps []*discoveryv1.EndpointSlice
		for i := range l.Items {
			eps = append(eps, &l.Items[i])
		}
		for _, n := range r.c.Nodes {
			var got []string
			for _, e := range translate.SelectEndpoints(svc, port, eps, translate.Node{Name: n.Name, Zone: n.Zone}) {
				got = append(got, e.Addr.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				last = fmt.Sprintf("the EndpointSlices select %v for %s, want %v", got, n.Name, want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("endpoints of %s: %w (%s)", svc.Name, err, last)
	}
	if _, err := measure.WaitProgrammed(ctx, r.c, []measure.Dialled{measure.ServicePort(svc, 80)}); err != nil {
		return fmt.Errorf("programming %s: %w", svc.Name, err)
	}
	return nil
}
