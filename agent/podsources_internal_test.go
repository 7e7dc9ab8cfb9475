package agent

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
)

func ownedPod(name, ip string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels, OwnerReferences: owners},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func controller(apiVersion, kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(true)}
}

// TestPodSources: a source address names the pod that has it and the workload it counts
// under: a Deployment's pod by the Deployment, another controller's by the controller, an
// owner that is no controller or none by the pod itself; host-network and finished pods name
// no one; of a finished pod and its address's next holder, the holder.
func TestPodSources(t *testing.T) {
	hash := map[string]string{"pod-template-hash": "5d8f7c"}
	finished := ownedPod("old-job-x", "10.244.0.9", nil, controller("batch/v1", "Job", "old-job"))
	finished.Status.Phase = corev1.PodSucceeded
	hostNet := ownedPod("hostnet", "10.0.0.2", nil)
	hostNet.Spec.HostNetwork = true
	reused := ownedPod("new-owner", "10.244.0.10", nil)
	reused.CreationTimestamp = metav1.NewTime(time.Unix(2000, 0))
	older := ownedPod("old-owner", "10.244.0.10", nil)
	older.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	pods := []*corev1.Pod{
		ownedPod("client-5d8f7c-x2k4q", "10.244.0.1", hash, controller("apps/v1", "ReplicaSet", "client-5d8f7c")),
		ownedPod("bare-rs-q", "10.244.0.2", nil, controller("apps/v1", "ReplicaSet", "bare-rs")),
		ownedPod("db-0", "10.244.0.3", nil, controller("apps/v1", "StatefulSet", "db")),
		ownedPod("loner", "10.244.0.4", nil),
		ownedPod("adopted", "10.244.0.5", nil, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"}),
		// A hash label that is not the ReplicaSet's suffix: the ReplicaSet's name stays.
		ownedPod("odd-x", "10.244.0.6", hash, controller("apps/v1", "ReplicaSet", "odd")),
		finished, hostNet, older, reused,
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byPodIPIndex: podIPIndex})
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	src := podSources{pods: idx}
	for ip, want := range map[string]*xdsserver.Source{
		"10.244.0.1":  {Namespace: "ns", Pod: "client-5d8f7c-x2k4q", Workload: "client"},
		"10.244.0.2":  {Namespace: "ns", Pod: "bare-rs-q", Workload: "bare-rs"},
		"10.244.0.3":  {Namespace: "ns", Pod: "db-0", Workload: "db"},
		"10.244.0.4":  {Namespace: "ns", Pod: "loner", Workload: "loner"},
		"10.244.0.5":  {Namespace: "ns", Pod: "adopted", Workload: "adopted"},
		"10.244.0.6":  {Namespace: "ns", Pod: "odd-x", Workload: "odd"},
		"10.244.0.10": {Namespace: "ns", Pod: "new-owner", Workload: "new-owner"},
		"10.244.0.9":  nil,
		"10.0.0.2":    nil,
		"10.244.7.7":  nil,
	} {
		got, ok := src.Source(netip.MustParseAddr(ip))
		switch {
		case want == nil && ok:
			t.Errorf("%s names %+v, want no pod", ip, got)
		case want != nil && (!ok || got != *want):
			t.Errorf("%s names %+v (%v), want %+v", ip, got, ok, *want)
		}
	}
}
