package enroll

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Cut modes: who takes the enrolled namespaces' Services off kube-proxy.
const (
	// CutGuard: the guard follows the agent's ConfigMap namespace selector, as it does when
	// deployed (no override flag).
	CutGuard = "guard"
	// CutLabel: this package labels each Service for the guard's label mode.
	CutLabel = "label"
)

// Options say how to enroll.
type Options struct {
	// Selector is the namespace label selector (kubectl syntax) that enrolls
	// the e2e framework's namespaces: the agent's ConfigMap key, which the
	// guard follows in CutGuard mode.
	Selector string
	// Cut is CutGuard or CutLabel.
	Cut string
	// GuardCut is the guard's cut mode (its --cut, CutGuard only):
	// contract.GuardCutProxy refuses only the node proxy's connections, so
	// the framework's own clients keep kube-proxy; contract.GuardCutAll cuts
	// kube-proxy's entries for everyone, as the legs do. Empty: the guard's
	// default.
	GuardCut string
	// Proxy is the node proxy (manifests.ProxyBuiltin or ProxyEnvoy).
	Proxy      string
	EnvoyImage string
	// Log prints progress.
	Log func(format string, args ...any)
}

// Validate refuses options Enroll cannot carry out, before it changes anything.
func (o Options) Validate() error {
	if _, err := labels.Parse(o.Selector); err != nil {
		return fmt.Errorf("namespace selector %q: %w", o.Selector, err)
	}
	if o.Cut != CutGuard && o.Cut != CutLabel {
		return fmt.Errorf("cut %q: want %s or %s", o.Cut, CutGuard, CutLabel)
	}
	if o.GuardCut != "" && o.GuardCut != contract.GuardCutProxy && o.GuardCut != contract.GuardCutAll {
		return fmt.Errorf("guard cut %q: want %s or %s", o.GuardCut, contract.GuardCutProxy, contract.GuardCutAll)
	}
	return nil
}

// Describe is the setup in one line, for the report.
func (o Options) Describe() string {
	cut := "guard following the agent's namespace selector"
	switch o.GuardCut {
	case contract.GuardCutProxy:
		cut += " --cut=proxy (only the node proxy's connections refused; every other client keeps kube-proxy)"
	case contract.GuardCutAll:
		cut += " --cut=all (kube-proxy's entries cut for every client)"
	case "":
		cut += " (the guard's default cut: all)"
	}
	if o.Cut == CutLabel {
		cut = "each Service labelled " + contract.KubeProxyLabel + "=" + contract.KubeProxyCut + " as it appears (guard label mode)"
	}
	return fmt.Sprintf("proxy %s; svclb-cni enrolls namespaces %q; cut: %s", o.Proxy, o.Selector, cut)
}

// Enrolled is a cluster set up by Enroll; Restore undoes it.
type Enrolled struct {
	c       *cluster.Cluster
	o       Options
	saved   map[string]*string // agent ConfigMap keys as found (nil: absent)
	stopCut context.CancelFunc
	cutDone chan error
}

// Enroll sets the cluster up: node DaemonSet with svclb-cni, the agent's
// namespace selector, the cut. ctx bounds the set-up; the labeler (CutLabel)
// runs until Restore.
func Enroll(ctx context.Context, c *cluster.Cluster, o Options) (*Enrolled, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	e := &Enrolled{c: c, o: o}
	var err error
	if e.saved, err = readKeys(ctx, c, contract.KeyPhase1, contract.KeyPhase2, contract.KeyNamespaceSelector, contract.KeyRefusal); err != nil {
		return nil, err
	}
	o.Log("node DaemonSet with svclb-cni")
	if err := deployNode(ctx, c, o, &manifests.CNIOptions{}); err != nil {
		return e, err
	}
	o.Log("agent namespace selector %q", o.Selector)
	if err := setKey(ctx, c, contract.KeyNamespaceSelector, &o.Selector); err != nil {
		return e, err
	}
	if err := waitSelector(ctx, c, o.Selector); err != nil {
		return e, err
	}
	switch o.Cut {
	case CutGuard:
		o.Log("guard following the agent's namespace selector, cut %q", o.GuardCut)
		g := guard.Defaults()
		if o.GuardCut != "" {
			g.Cut = o.GuardCut
		}
		if err := deployGuard(ctx, c, g); err != nil {
			return e, err
		}
	case CutLabel:
		sel, _ := labels.Parse(o.Selector)
		lctx, cancel := context.WithCancel(context.Background())
		e.stopCut, e.cutDone = cancel, make(chan error, 1)
		l := &Labeler{CS: c.CS, Selector: sel, Cut: func(ctx context.Context, svc *corev1.Service) error { return guard.Cut(ctx, c, svc) }, Log: o.Log}
		go func() { e.cutDone <- l.Run(lctx) }()
		o.Log("labelling every Service of namespaces %q for the guard", o.Selector)
	}
	return e, nil
}

// Phase switches the agent's Phase 1 and 2 flags, with refusal: reset (in
// force in green only: it needs both phases), and waits until every agent
// applies them. Reset makes a Service without endpoints refuse the SYN, as
// kube-proxy does (docs/peer.md, "a refusal is close after accept").
func (e *Enrolled) Phase(ctx context.Context, on bool) error {
	v := fmt.Sprint(on)
	return agent.SetConfig(ctx, e.c, map[string]string{contract.KeyPhase1: v, contract.KeyPhase2: v, contract.KeyRefusal: contract.RefusalReset})
}

// Restore waits for the enrolled namespaces to go (their pods' DEL still
// reaches the plugin), then puts the guard, the node DaemonSet and the agent
// ConfigMap back as Enroll found them. Every step runs; the errors are joined.
func (e *Enrolled) Restore(ctx context.Context) error {
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if e.stopCut != nil {
		e.stopCut()
		note(<-e.cutDone)
	}
	e.o.Log("deleting the enrolled namespaces the e2e framework left, waiting for them to go")
	note(deleteNamespaces(ctx, e.c, e.o.Selector))
	note(waitNamespacesGone(ctx, e.c, e.o.Selector, 4*time.Minute))
	if e.o.Cut == CutGuard {
		e.o.Log("guard as the suite deploys it")
		note(deployGuard(ctx, e.c, guard.Defaults()))
	}
	e.o.Log("node DaemonSet without svclb-cni")
	note(deployNode(ctx, e.c, e.o, nil))
	e.o.Log("agent ConfigMap as found")
	for k, v := range e.saved {
		note(setKey(ctx, e.c, k, v))
	}
	if len(errs) > 0 {
		return fmt.Errorf("restore: %s", strings.Join(errs, "; "))
	}
	return nil
}

// deployNode applies the suite's node DaemonSet with cni (nil: without),
// waits until every agent answers and the nodes' conflists have (or have not)
// the plugin.
func deployNode(ctx context.Context, c *cluster.Cluster, o Options, cni *manifests.CNIOptions) error {
	objs, err := agent.Objects(agent.Options{Proxy: o.Proxy, EnvoyImage: o.EnvoyImage, CNI: cni})
	if err != nil {
		return err
	}
	cluster.StampImageIDs(ctx, objs)
	if err := c.Apply(ctx, "node", objs); err != nil {
		return err
	}
	if err := c.WaitDaemonSet(ctx, contract.Namespace, contract.NodeDaemonSet, 3*time.Minute); err != nil {
		return err
	}
	if _, err := agent.Statuses(ctx, c); err != nil {
		return err
	}
	return waitConflists(ctx, c, cni != nil)
}

// deployGuard applies the guard of g and waits for it.
func deployGuard(ctx context.Context, c *cluster.Cluster, g guard.Options) error {
	objs := guard.Objects(g)
	cluster.StampImageIDs(ctx, objs)
	if err := c.Apply(ctx, "guard", objs); err != nil {
		return err
	}
	return c.WaitDaemonSet(ctx, contract.Namespace, guard.Name, 3*time.Minute)
}

// waitConflists waits until every node's CNI configuration has (or has not) the plugin.
func waitConflists(ctx context.Context, c *cluster.Cluster, want bool) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range c.Nodes {
			out, err := c.NodeExec(ctx, n.Name, "sh", "-c", "cat "+contract.CNIConfDir+"/*.conflist")
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if strings.Contains(out, `"`+contract.CNIPluginType+`"`) != want {
				last = fmt.Sprintf("node %s: plugin present=%v", n.Name, !want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s in every node's conflist=%v: %w (%s)", contract.CNIPluginType, want, err, last)
	}
	return nil
}

// waitSelector waits until every agent reports sel as its namespace selector.
func waitSelector(ctx context.Context, c *cluster.Cluster, sel string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		sts, err := agent.Statuses(ctx, c)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for node, s := range sts {
			if s.Enrollment == nil || s.Enrollment.NamespaceSelector != sel {
				last = fmt.Sprintf("agent on %s: enrollment %+v", node, s.Enrollment)
				return false, nil
			}
		}
		return len(sts) == len(c.Nodes), nil
	})
	if err != nil {
		return fmt.Errorf("every agent enrolling %q: %w (%s)", sel, err, last)
	}
	return nil
}

// deleteNamespaces deletes what the framework failed to (an apiserver that
// was unreachable in its AfterEach): the namespaces sel matches.
func deleteNamespaces(ctx context.Context, c *cluster.Cluster, sel string) error {
	l, err := c.CS.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list namespaces %q: %w", sel, err)
	}
	for _, ns := range l.Items {
		if ns.DeletionTimestamp != nil {
			continue
		}
		if err := c.CS.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
		}
	}
	return nil
}

// waitNamespacesGone waits until no namespace matches sel.
func waitNamespacesGone(ctx context.Context, c *cluster.Cluster, sel string, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := c.CS.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, ns := range l.Items {
			left = append(left, ns.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("namespaces %q still there: %v: %w", sel, left, err)
	}
	return nil
}

// readKeys reads keys of the agent ConfigMap (nil: absent).
func readKeys(ctx context.Context, c *cluster.Cluster, keys ...string) (map[string]*string, error) {
	out := map[string]*string{}
	cm, err := c.CS.CoreV1().ConfigMaps(contract.Namespace).Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get configmap %s: %w", contract.AgentConfigMap, err)
	}
	for _, k := range keys {
		out[k] = nil
		if cm != nil {
			if v, ok := cm.Data[k]; ok {
				out[k] = &v
			}
		}
	}
	return out, nil
}

// setKey sets (v nil: removes) one key of the agent ConfigMap.
func setKey(ctx context.Context, c *cluster.Cluster, k string, v *string) error {
	cms := c.CS.CoreV1().ConfigMaps(contract.Namespace)
	cm, err := cms.Get(ctx, contract.AgentConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if v == nil {
			return nil
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap, Namespace: contract.Namespace}, Data: map[string]string{k: *v}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	} else if err != nil {
		return fmt.Errorf("get configmap %s: %w", contract.AgentConfigMap, err)
	}
	old, had := cm.Data[k]
	switch {
	case v == nil && !had, v != nil && had && old == *v:
		return nil
	case v == nil:
		delete(cm.Data, k)
	default:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[k] = *v
	}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update configmap %s key %s: %w", contract.AgentConfigMap, k, err)
	}
	return nil
}
