package perf

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
)

// controlPlane is what a size's figures depend on in the cluster's own components: how
// often each restarted, and the leader-election flags they run with (kindconfig/perf.yaml
// sets them; cluster.yaml leaves kubeadm's defaults).
type controlPlane struct {
	// restarts of each static pod's containers, keyed by component (kube-scheduler, …).
	restarts map[string]int32
	// flags are the flags perf.yaml sets ("kube-scheduler --leader-elect-lease-duration=60s"),
	// as the components run them.
	flags []string
}

// perfFlags are the flags kindconfig/perf.yaml gives the control plane.
var perfFlags = []string{"--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--kube-api-qps", "--kube-api-burst", "--unsafe-no-fsync"}

// readControlPlane reads kubeadm's static pods (label tier=control-plane).
func readControlPlane(ctx context.Context) (controlPlane, error) {
	var list corev1.PodList
	if err := suite.cluster.Client.Resources("kube-system").List(ctx, &list, resources.WithLabelSelector("tier=control-plane")); err != nil {
		return controlPlane{}, fmt.Errorf("control plane pods: %w", err)
	}
	return controlPlaneOf(list.Items), nil
}

// controlPlaneOf reads restarts and perf.yaml's flags off the static pods.
func controlPlaneOf(pods []corev1.Pod) controlPlane {
	cp := controlPlane{restarts: map[string]int32{}}
	for _, p := range pods {
		component := p.Labels["component"]
		for _, cs := range p.Status.ContainerStatuses {
			cp.restarts[component] += cs.RestartCount
		}
		for _, c := range p.Spec.Containers {
			for _, arg := range c.Command {
				for _, f := range perfFlags {
					if strings.HasPrefix(arg, f+"=") {
						cp.flags = append(cp.flags, component+" "+arg)
					}
				}
			}
		}
	}
	slices.Sort(cp.flags)
	return cp
}

// since says what changed from before: the components that restarted, and how often.
func (cp controlPlane) since(before controlPlane) string {
	var restarted []string
	for _, c := range slices.Sorted(maps.Keys(cp.restarts)) {
		if d := cp.restarts[c] - before.restarts[c]; d > 0 {
			restarted = append(restarted, fmt.Sprintf("%s %d×", c, d))
		}
	}
	if len(restarted) == 0 {
		return "no control-plane container restarted"
	}
	return "control-plane restarts: " + strings.Join(restarted, ", ")
}

// describe names the flags the components run with, or says they run kubeadm's defaults.
func (cp controlPlane) describe() string {
	if len(cp.flags) == 0 {
		return "control plane: kubeadm's defaults (kindconfig/cluster.yaml)"
	}
	return "control plane: " + strings.Join(cp.flags, "; ")
}
