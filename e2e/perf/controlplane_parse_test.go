package perf

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func staticPod(component string, restarts int32, command ...string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"component": component}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: component, Command: command}}},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{RestartCount: restarts}}},
	}
}

func TestControlPlaneOf(t *testing.T) {
	before := controlPlaneOf([]corev1.Pod{
		staticPod("kube-scheduler", 1, "kube-scheduler", "--leader-elect=true", "--leader-elect-lease-duration=60s"),
		staticPod("etcd", 0, "etcd", "--unsafe-no-fsync=true", "--data-dir=/var/lib/etcd"),
		staticPod("kube-apiserver", 0, "kube-apiserver", "--kube-api-qps-not-a-flag"),
	})
	if got, want := before.describe(), "control plane: etcd --unsafe-no-fsync=true; kube-scheduler --leader-elect-lease-duration=60s"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	after := controlPlaneOf([]corev1.Pod{
		staticPod("kube-scheduler", 3, "kube-scheduler"),
		staticPod("etcd", 0, "etcd"),
		staticPod("kube-apiserver", 1, "kube-apiserver"),
	})
	if got, want := after.since(before), "control-plane restarts: kube-apiserver 1×, kube-scheduler 2×"; got != want {
		t.Errorf("since = %q, want %q", got, want)
	}
	if got, want := before.since(before), "no control-plane container restarted"; got != want {
		t.Errorf("since itself = %q, want %q", got, want)
	}
	if got, want := after.describe(), "control plane: kubeadm's defaults (kindconfig/cluster.yaml)"; got != want {
		t.Errorf("describe without perf flags = %q, want %q", got, want)
	}
}
