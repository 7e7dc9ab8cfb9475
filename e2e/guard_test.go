package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/pkg/kubeproxyguard"
)

// guardStatuses reads every guard pod's /status, keyed by node.
func guardStatuses(ctx context.Context) (map[string]kubeproxyguard.Status, error) {
	pods, err := guardPods(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]kubeproxyguard.Status{}
	for _, p := range pods {
		b, err := suite.cluster.PodGet(ctx, systemNS, p.Name, guardPort, "/status")
		if err != nil {
			return nil, err
		}
		var st kubeproxyguard.Status
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("guard %s /status: %w", p.Name, err)
		}
		out[p.Spec.NodeName] = st
	}
	return out, nil
}

func guardService(st kubeproxyguard.Status, svc *corev1.Service) (kubeproxyguard.ServiceStatus, bool) {
	for _, s := range st.Services {
		if s.Namespace == svc.Namespace && s.Name == svc.Name {
			return s, true
		}
	}
	return kubeproxyguard.ServiceStatus{}, false
}

// kubeProxyObjects returns the lines of a node's kube-proxy table that belong
// to svc: its service-ips element and its chains (kube-proxy names them
// "<kind>-<hash>-<ns>/<name>/<proto>/<port>").
func kubeProxyObjects(table string, svc *corev1.Service) []string {
	var out []string
	key := svc.Namespace + "/" + svc.Name + "/"
	for _, l := range strings.Split(table, "\n") {
		if strings.Contains(l, key) || (svc.Spec.ClusterIP != "" && strings.Contains(l, svc.Spec.ClusterIP+" . tcp .")) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// waitCutEverywhere waits until, on every node, the guard reports svc clean
// and the node's own nft table holds nothing of it. Both: the guard could be
// wrong about itself, and nft alone cannot tell a cut from a Service
// kube-proxy never programmed.
func waitCutEverywhere(ctx context.Context, svc *corev1.Service, timeout time.Duration) (string, error) {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		sts, err := guardStatuses(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, n := range suite.nodes {
			st, ok := sts[n.Name]
			if !ok {
				last = "no guard on " + n.Name
				return false, nil
			}
			ss, ok := guardService(st, svc)
			if !ok || ss.State != kubeproxyguard.StateClean {
				last = fmt.Sprintf("guard on %s: %s/%s state %q (guarded=%v)", n.Name, svc.Namespace, svc.Name, ss.State, ok)
				return false, nil
			}
			table, err := suite.cluster.KubeProxyTable(ctx, n.Name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if objs := kubeProxyObjects(table, svc); len(objs) > 0 {
				last = fmt.Sprintf("nft on %s still has %d objects of %s/%s: %s", n.Name, len(objs), svc.Namespace, svc.Name, objs[0])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return last, fmt.Errorf("kube-proxy objects of %s/%s not deleted on every node: %w (last: %s)", svc.Namespace, svc.Name, err, last)
	}
	return fmt.Sprintf("kube-proxy objects of %s/%s gone on %d/%d nodes (guard: clean; nft: none)", svc.Namespace, svc.Name, len(suite.nodes), len(suite.nodes)), nil
}
