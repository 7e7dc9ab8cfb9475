package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// agentDownCheck takes the agent on node out of the plugin's reach (its socket removed: the
// plugin's dial fails as with a dead agent), creates an enrolled pod there, and finds that the
// pod does not start (its sandbox's ADD fails naming the socket) until the agent is restarted,
// and is captured once it starts. A plain pod of the legs' namespace (not enrolled), created
// with it, must be Ready meanwhile: the plugin passes it through on the agent's namespace view
// without the agent. It returns what it saw, or why the check failed.
func agentDownCheck(ctx context.Context, node string) (string, error) {
	c := suite.cluster
	podName, err := agent.PodOn(ctx, c, node)
	if err != nil {
		return "", err
	}
	if _, err := c.NodeExec(ctx, node, "rm", "-f", contract.EnrollSocket); err != nil {
		return "", err
	}
	progress("leg enroll: agent socket removed on %s: %s", node, nodeCNIState(ctx, node, "none"))
	late := workload.PlainClient(enrollNS, "late", node, "enroll-late")
	plain := workload.PlainClient(suite.legsNS, "down-plain", node, "enroll-down-plain")
	if err := c.Create(ctx, late, plain); err != nil {
		return "", err
	}
	defer func() { // best effort: it has served once Ready
		_ = c.CS.CoreV1().Pods(plain.Namespace).Delete(ctx, plain.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	// The kubelet's sandbox ADD of pod late fails with the plugin's error naming the socket;
	// pod down-plain starts.
	var event string
	var plainUp time.Duration // from its creation to Ready, both the apiserver's timestamps
	err = wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if plainUp == 0 {
			if p, err := c.CS.CoreV1().Pods(plain.Namespace).Get(ctx, plain.Name, metav1.GetOptions{}); err == nil && cluster.PodReady(p) {
				plainUp = max(time.Nanosecond, readySince(p).Sub(p.CreationTimestamp.Time))
			}
		}
		if event == "" {
			evs, err := c.CS.CoreV1().Events(enrollNS).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "late").String()})
			if err != nil {
				return false, nil
			}
			for _, e := range evs.Items {
				if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, contract.EnrollSocket) {
					event = e.Message
				}
			}
		}
		return event != "" && plainUp != 0, nil
	})
	if err != nil && event == "" {
		return "", fmt.Errorf("no FailedCreatePodSandBox naming %s for pod late with the agent unreachable: %w; on the node: %s",
			contract.EnrollSocket, err, nodeCNIState(ctx, node, "late"))
	}
	if err != nil {
		return "", fmt.Errorf("pod %s/%s of a namespace not enrolled was not Ready with the agent unreachable: %w; on the node: %s",
			plain.Namespace, plain.Name, err, nodeCNIState(ctx, node, plain.Name))
	}
	p, err := c.CS.CoreV1().Pods(enrollNS).Get(ctx, "late", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if cluster.PodReady(p) || p.Status.PodIP != "" {
		return "", fmt.Errorf("pod late started (ip %q) with the agent unreachable", p.Status.PodIP)
	}
	// Restart the agent container: a new agent opens the socket again.
	restartedAt := time.Now()
	restarts := restartCount(ctx, podName, manifests.AgentContainer)
	id, err := containerID(ctx, podName, manifests.AgentContainer)
	if err != nil {
		return "", err
	}
	// The offline node image has ctr, not crictl; the kubelet restarts the killed container.
	if _, err := c.NodeExec(ctx, node, "ctr", "-n", "k8s.io", "task", "kill", "-s", "SIGTERM", id); err != nil {
		return "", err
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return restartCount(ctx, podName, manifests.AgentContainer) > restarts, nil
	})
	if err != nil {
		return "", fmt.Errorf("the agent on %s did not restart: %w", node, err)
	}
	pods, err := c.WaitPodsReady(ctx, enrollNS, workload.RoleLabel+"=enroll-late", 1, 3*time.Minute)
	if err != nil {
		return "", fmt.Errorf("pod late after the agent came back: %w", err)
	}
	st, err := agent.Status(ctx, c, podName)
	if err != nil {
		return "", err
	}
	if !slices.Contains(st.Enrollment.Enrolled, enrollNS+"/late") {
		return "", fmt.Errorf("pod late started but the agent does not list it enrolled: %v", st.Enrollment.Enrolled)
	}
	if slices.Contains(st.Enrollment.Enrolled, plain.Namespace+"/"+plain.Name) {
		return "", fmt.Errorf("the agent lists pod %s/%s of a namespace not enrolled as enrolled: %v", plain.Namespace, plain.Name, st.Enrollment.Enrolled)
	}
	started := readySince(&pods[0])
	if started.Before(restartedAt) {
		return "", fmt.Errorf("pod late was ready at %s, before the agent restart at %s", started, restartedAt)
	}
	return fmt.Sprintf("agent unreachable: sandbox refused (%q), while pod %s/%s of a namespace not enrolled was Ready %s after its creation; "+
		"after the agent restart pod late became ready %s later and is enrolled",
		around(event, contract.EnrollSocket, 200), plain.Namespace, plain.Name, plainUp.Round(time.Second),
		started.Sub(restartedAt).Round(100*time.Millisecond)), nil
}

// containerID is the runtime id of container in the node DaemonSet's pod podName.
func containerID(ctx context.Context, podName, container string) (string, error) {
	p, err := suite.cluster.CS.CoreV1().Pods(contract.Namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container && s.ContainerID != "" {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			return id, nil
		}
	}
	return "", fmt.Errorf("pod %s has no running container %s", podName, container)
}

func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// around is at most n bytes of s that hold its first sub (the event's prefix is the
// runtime's, the plugin's error naming the socket comes last), marked where cut.
func around(s, sub string, n int) string {
	if len(s) <= n {
		return s
	}
	end := len(s)
	if i := strings.Index(s, sub); i >= 0 {
		end = min(i+len(sub)+n/4, len(s)) // and a little of what follows it
	}
	start := max(0, end-n)
	end = start + n
	out := s[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(s) {
		out += "…"
	}
	return out
}

// TestAround needs no cluster: the report keeps the part of a long event that names the socket.
func TestAround(t *testing.T) {
	event := strings.Repeat("x", 300) + " dial unix /var/run/svclb-cni/enroll.sock: no such file" + strings.Repeat("y", 300)
	got := around(event, contract.EnrollSocket, 120)
	if !strings.Contains(got, contract.EnrollSocket) || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") || len(got) > 120+2*len("…") {
		t.Errorf("around = %q", got)
	}
	if got := around("short", contract.EnrollSocket, 120); got != "short" {
		t.Errorf("short: %q", got)
	}
	if got := around(strings.Repeat("z", 200), contract.EnrollSocket, 50); got != "…"+strings.Repeat("z", 50) {
		t.Errorf("absent: want the tail, got %q", got)
	}
}

// nodeCNIState is what the node shows of the plugin, for a failed check: the socket
// directory, the active conflist's plugin types and the configuration libcni cached for the
// pod's sandbox.
func nodeCNIState(ctx context.Context, node, pod string) string {
	script := fmt.Sprintf(`ls -la %s; for f in %s/*.conflist; do echo "$f:"; grep -o '"type": *"[^"]*"' "$f" | tr '\n' ' '; echo; done; `+
		`for f in $(grep -l 'K8S_POD_NAME","%s"' /var/lib/cni/results/* 2>/dev/null); do echo "$f:"; grep -o '"config":"[^"]*"' "$f" | cut -d'"' -f4 | base64 -d | grep -o '"type": *"[^"]*"' | tr '\n' ' '; done`,
		contract.EnrollSocketDir, contract.CNIConfDir, pod)
	out, err := suite.cluster.NodeExec(ctx, node, "sh", "-c", script)
	if err != nil {
		return fmt.Sprintf("(%v) %s", err, out)
	}
	return strings.Join(strings.Fields(out), " ")
}

// restartCount is how often container of the node DaemonSet's pod podName restarted (-1: unknown).
func restartCount(ctx context.Context, podName, container string) int32 {
	p, err := suite.cluster.CS.CoreV1().Pods(contract.Namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return -1
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.RestartCount
		}
	}
	return -1
}
