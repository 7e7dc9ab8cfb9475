// The pods of source addresses: which pod on this node a connection came from, and the
// workload it counts under.

package agent

import (
	"net/netip"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
)

// byPodIPIndex indexes the node's pods by each of their status.podIPs.
const byPodIPIndex = "podIP"

// podIPIndex keys a pod by its addresses. A host-network pod has the node's address, which
// names no one pod, and a pod that has finished may have handed its address on: neither is
// indexed.
func podIPIndex(o any) ([]string, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok || pod.Spec.HostNetwork || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, nil
	}
	out := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	return out, nil
}

// podSources answers xdsserver.Sources from the agent's pod informer (this node's pods:
// the captured ones, or all of them with CNI enrollment), indexed by address.
type podSources struct{ pods cache.Indexer }

func (p podSources) Source(ip netip.Addr) (xdsserver.Source, bool) {
	objs, err := p.pods.ByIndex(byPodIPIndex, ip.Unmap().String())
	if err != nil || len(objs) == 0 {
		return xdsserver.Source{}, false
	}
	// Two live pods on one node never share an address; of a pod deleted and its address's
	// next holder, the informer may briefly hold both: the newer one dials now.
	var pod *corev1.Pod
	for _, o := range objs {
		if c, ok := o.(*corev1.Pod); ok && (pod == nil || pod.CreationTimestamp.Before(&c.CreationTimestamp)) {
			pod = c
		}
	}
	if pod == nil {
		return xdsserver.Source{}, false
	}
	return xdsserver.Source{Namespace: pod.Namespace, Pod: pod.Name, Workload: workloadOf(pod)}, true
}

// workloadOf names the workload a pod counts under: its Deployment for a pod of a
// Deployment's ReplicaSet (the ReplicaSet's name without the pod-template-hash suffix the
// Deployment controller adds), else its controller's name (a StatefulSet, DaemonSet, Job, a
// bare ReplicaSet), else the pod's own name. The ReplicaSet is not read: its name and the
// pod's pod-template-hash label say it, so the agent needs no ReplicaSet informer.
func workloadOf(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return pod.Name
	}
	if ref.Kind == "ReplicaSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String() {
		if h := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
			if name, ok := strings.CutSuffix(ref.Name, "-"+h); ok && name != "" {
				return name
			}
		}
	}
	return ref.Name
}
