package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	systemNS      = "svclb-system"
	nodeDaemonSet = "svclb-node"
	agentConfig   = "svclb-agent"
	agentPort     = 9750
	guardPort     = 9751
)

// daemonPods lists the pods of a DaemonSet in svclb-system by owner, so the
// suite does not depend on the fixtures' label choices.
func daemonPods(ctx context.Context, dsName func(string) bool) ([]corev1.Pod, error) {
	pods, err := suite.cluster.CS.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s pods: %w", systemNS, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && dsName(o.Name) && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func agentPods(ctx context.Context) ([]corev1.Pod, error) {
	return daemonPods(ctx, func(n string) bool { return n == nodeDaemonSet })
}

func guardPods(ctx context.Context) ([]corev1.Pod, error) {
	return daemonPods(ctx, func(n string) bool { return strings.Contains(n, "guard") })
}

// agentStatus is the part of the agent's /status the suite relies on: the
// effective phases (top level, or under "phases"), the snapshot version, and
// the on-demand CDS state (absent before on-demand mode existed: CDS empty).
type agentStatus struct {
	Node              string
	Phase1, Phase2    bool
	SnapshotVersion   string
	CDS               string
	Demanded, Pending int
	raw               []byte
}

func getAgentStatus(ctx context.Context, pod string) (*agentStatus, error) {
	b, err := suite.cluster.PodGet(ctx, systemNS, pod, agentPort, "/status")
	if err != nil {
		return nil, err
	}
	s, err := decodeAgentStatus(b)
	if err != nil {
		return nil, fmt.Errorf("agent %s /status: %w", pod, err)
	}
	return s, nil
}

func decodeAgentStatus(b []byte) (*agentStatus, error) {
	type phases struct {
		Phase1 *bool `json:"phase1"`
		Phase2 *bool `json:"phase2"`
	}
	var raw struct {
		Node     string          `json:"node"`
		NodeName string          `json:"nodeName"`
		Phases   *phases         `json:"phases"`
		Version  json.RawMessage `json:"snapshotVersion"`
		CDS      string          `json:"cds"`
		Demanded int             `json:"demanded"`
		Pending  int             `json:"pending"`
		phases
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	p := raw.phases
	if raw.Phases != nil {
		p = *raw.Phases
	}
	if p.Phase1 == nil || p.Phase2 == nil {
		return nil, fmt.Errorf("no phase1/phase2 in %s", truncate(string(b), 200))
	}
	s := &agentStatus{Node: raw.Node, Phase1: *p.Phase1, Phase2: *p.Phase2, SnapshotVersion: strings.Trim(string(raw.Version), `"`),
		CDS: raw.CDS, Demanded: raw.Demanded, Pending: raw.Pending, raw: b}
	if s.Node == "" {
		s.Node = raw.NodeName
	}
	return s, nil
}

// applied reports whether an agent's /status shows ConfigMap key k = v in
// effect.
func (s *agentStatus) applied(k, v string) bool {
	switch k {
	case "phase1":
		return strconv.FormatBool(s.Phase1) == v
	case "phase2":
		return strconv.FormatBool(s.Phase2) == v
	case "cds":
		return s.CDS == v
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// setPhases writes the agent's Phase flags and waits until every node's
// agent reports them.
func setPhases(ctx context.Context, p1, p2 bool) error {
	return setAgentConfig(ctx, map[string]string{"phase1": strconv.FormatBool(p1), "phase2": strconv.FormatBool(p2)})
}

// setAgentConfig writes keys of the agent's ConfigMap and waits until every
// node's agent reports them (agentStatus.applied): the agent re-renders
// without restarting, so the only proof that a flip took effect is its own
// /status.
func setAgentConfig(ctx context.Context, want map[string]string) error {
	cms := suite.cluster.CS.CoreV1().ConfigMaps(systemNS)
	cm, err := cms.Get(ctx, agentConfig, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: agentConfig, Namespace: systemNS}, Data: want}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create configmap %s: %w", agentConfig, err)
		}
	case err != nil:
		return fmt.Errorf("get configmap %s: %w", agentConfig, err)
	default:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed := false
		for k, v := range want {
			if cm.Data[k] != v {
				cm.Data[k] = v
				changed = true
			}
		}
		if changed {
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update configmap %s: %w", agentConfig, err)
			}
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k+"="+want[k])
	}
	sort.Strings(keys)
	t0 := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := agentPods(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(pods) < len(suite.nodes) {
			last = fmt.Sprintf("%d agent pods for %d nodes", len(pods), len(suite.nodes))
			return false, nil
		}
		for _, p := range pods {
			s, err := getAgentStatus(ctx, p.Name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for k, v := range want {
				if !s.applied(k, v) {
					last = fmt.Sprintf("agent %s on %s does not report %s=%s: %s", p.Name, p.Spec.NodeName, k, v, truncate(string(s.raw), 200))
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for every agent to apply %s: %w (last: %s)", strings.Join(keys, " "), err, last)
	}
	progress("agent config %s applied on every node in %s", strings.Join(keys, " "), time.Since(t0).Round(10*time.Millisecond))
	return nil
}
