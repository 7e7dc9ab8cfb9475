package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dumpDiagnostics writes what a reviewer needs to see why a leg failed: the
// guard's and the agents' status, every node's kube-proxy table, and the logs
// and events of the infrastructure and of the legs' pods. Best effort: each
// failure to collect becomes a line in errors.txt.
func dumpDiagnostics(ctx context.Context, dir string) {
	if suite == nil || suite.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		progress("dump: %v", err)
		return
	}
	var errs []string
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			errs = append(errs, err.Error())
		}
	}
	note := func(err error) { errs = append(errs, err.Error()) }

	if pods, err := guardPods(ctx); err != nil {
		note(err)
	} else {
		for _, p := range pods {
			b, err := suite.cluster.PodGet(ctx, systemNS, p.Name, guardPort, "/status")
			if err != nil {
				note(err)
				continue
			}
			write("guard-status-"+p.Spec.NodeName+".json", b)
		}
	}
	if pods, err := agentPods(ctx); err != nil {
		note(err)
	} else {
		for _, p := range pods {
			for _, path := range []string{"/status", "/metrics"} {
				b, err := suite.cluster.PodGet(ctx, systemNS, p.Name, agentPort, path)
				if err != nil {
					note(err)
					continue
				}
				write("agent"+strings.ReplaceAll(path, "/", "-")+"-"+p.Spec.NodeName+".txt", b)
			}
		}
	}
	for _, n := range suite.nodes {
		out, err := suite.cluster.KubeProxyTable(ctx, n.Name)
		if err != nil {
			note(err)
		}
		write("nft-kube-proxy-"+n.Name+".txt", []byte(out))
	}
	for _, ns := range []string{systemNS, suite.legsNS} {
		pods, err := suite.cluster.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			note(err)
			continue
		}
		var summary strings.Builder
		for _, p := range pods.Items {
			fmt.Fprintf(&summary, "%s\t%s\t%s\t%s\tready=%v\n", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase, podReady(&p))
			for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				b, err := suite.cluster.CS.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
				if err != nil {
					note(fmt.Errorf("logs %s/%s[%s]: %w", ns, p.Name, c.Name, err))
					continue
				}
				write(fmt.Sprintf("logs-%s-%s-%s.txt", ns, p.Name, c.Name), b)
			}
		}
		write("pods-"+ns+".tsv", []byte(summary.String()))
		if ev, err := suite.cluster.CS.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			var b strings.Builder
			for _, e := range ev.Items {
				fmt.Fprintf(&b, "%s\t%s\t%s/%s\t%s\t%s\n", e.LastTimestamp.Format(time.RFC3339), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
			write("events-"+ns+".tsv", []byte(b.String()))
		}
	}
	if len(errs) > 0 {
		write("errors.txt", []byte(strings.Join(errs, "\n")+"\n"))
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
