package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// enrollNS is the enrolled namespace of the enroll leg.
const enrollNS = "svclb-enroll"

type enrollWorkload struct {
	// labelled is Service enroll in the legs' namespace, labelled for the guard; byNamespace
	// is Service nsmode in the enrolled namespace, without the label: the guard's namespace
	// mode cuts it.
	labelled, byNamespace *corev1.Service
	enrolled              corev1.Pod  // the plain Deployment's pod in the enrolled namespace
	control               *corev1.Pod // a plain pod in the legs' namespace (not enrolled)
	node                  string      // where both run
	// nsCut is how the guard cut byNamespace (guard.WaitCut).
	nsCut string
	// down is what agentDownCheck saw; downErr why it failed.
	down, downErr string
}

// enrollChance: every attempt must succeed; the agent-down check only waits on signals.
var enrollChance = allSucceed + "; the agent-down check (prepare) waits on signals within bounds, not odds: " +
	"90 s for the kubelet's FailedCreatePodSandBox naming the socket and for the pod of the namespace not enrolled to be Ready, " +
	"1 min for the agent's restart, 3 min for the enrolled pod to be Ready"

// enroll: a plain Deployment (nothing of svclb in its spec) in a namespace labelled
// svclb.dev/mesh=enabled is captured by svclb-cni, and so reaches cut Services green: one
// labelled for the guard, and one of its own namespace that only the guard's namespace mode
// cut. A plain pod in a namespace that is not enrolled is left alone, and starts while the
// agent is unreachable.
var _ = leg.Define(legs, leg.Leg[enrollWorkload]{
	Name:  "enroll",
	Needs: leg.Needs{Workers: 1},
	Workloads: "svclb-cni on every node (node DaemonSet with manifests.CNIOptions, for this leg only); namespace svclb-enroll labelled " +
		"svclb.dev/mesh=enabled with a plain client Deployment (no init container, label or capability) on the first worker; Service enroll " +
		"(2 echo backends, labelled cut) and Service svclb-enroll/nsmode (2 echo backends, no label: the guard cuts it for its namespace, by the agent's " +
		"selector); a plain control pod in the legs' namespace; prepared once: the agent's socket removed, a pod of the enrolled namespace and a plain pod of " +
		"the legs' namespace created on that node, the agent restarted",
	Exercises: "cmd/svclb-cni and internal/cniplugin (ADD/CHECK/DEL), internal/capture (Install on the sandbox's netns), internal/enroll (the " +
		"plugin↔agent socket), agent/enrollment.go and enrollfile.go (decision from informers, listener on the plugin's netns path), agent/namespaceview.go (the " +
		"enrolled namespaces published for the plugin, which starts the others' pods without the agent), " +
		"internal/cniinstall (00-svclb.conflist), pkg/kubeproxyguard/namespaces.go and selector.go (WatchServicesByNamespace, the agent's selector)",
	Setup: "svclb-cni installed on every node (the node DaemonSet's cni-install sidecar); the guard follows the agent's namespace selector (" +
		contract.DefaultNamespaceSelector + ", the ConfigMap's default); namespace " + enrollNS + " labelled " + contract.DefaultNamespaceSelector +
		" with a plain client Deployment (no init container, label or capability); Service enroll in the legs' namespace (2 echo backends, labelled cut); " +
		"Service " + enrollNS + "/nsmode (2 echo backends, no svclb label: cut by the guard for its namespace); " +
		"a plain client in the legs' namespace (not enrolled) as control",
	RedExpect: "the enrolled client is captured (the agent lists it, set up by the plugin) but with Phase 1 off its connections to both cut VIPs " +
		"pass through to kube-proxy's REJECT: no reply, the proxy closes every attempt",
	GreenMeans: "every attempt of the enrolled client to both Services gets a backend's reply through its node's svc: clusters; " +
		"in both runs the agent lists the enrolled client with a listener and not the control; " +
		"(prepared once) a pod of the enrolled namespace created while the agent is unreachable starts only after the agent is back, captured, " +
		"and a pod of a namespace not enrolled created then on the same node is Ready without the agent",
	Chance:  enrollChance,
	Timeout: 8 * time.Minute,
	Prepare: prepareEnroll,
	Services: func(w enrollWorkload) []measure.Dialled {
		return []measure.Dialled{measure.ServicePort(w.labelled, 80), measure.ServicePort(w.byNamespace, 80)}
	},
	Measure: func(ctx context.Context, w enrollWorkload, run *evidence.Run) {
		for _, svc := range []*corev1.Service{w.labelled, w.byNamespace} {
			measure.FromEveryClient(ctx, suite.cluster, []corev1.Pod{w.enrolled}, workload.Addr(svc, 80), workload.Quick, run)
			if run.Error != "" {
				return
			}
		}
		pod, err := agent.PodOn(ctx, suite.cluster, w.node)
		if err != nil {
			run.Error = err.Error()
			return
		}
		st, err := agent.Status(ctx, suite.cluster, pod)
		if err != nil || st.Enrollment == nil {
			run.Error = fmt.Sprintf("agent on %s: no enrollment status (%v)", w.node, err)
			return
		}
		me, ctl := w.enrolled.Namespace+"/"+w.enrolled.Name, w.control.Namespace+"/"+w.control.Name
		listed := slices.Contains(st.Enrollment.Enrolled, me)
		_, listener := agent.Listener(st, w.enrolled.Namespace, w.enrolled.Name)
		controlLeft := !slices.Contains(st.Enrollment.Enrolled, ctl)
		if _, l := agent.Listener(st, w.control.Namespace, w.control.Name); l {
			controlLeft = false
		}
		captured := listed && listener && controlLeft && w.downErr == ""
		run.MetGreen = captured && run.Attempts > 0 && run.Replies == run.Attempts
		run.MetRed = captured && run.Attempts > 0 && run.Replies == 0 && run.ProxyClosed == run.Attempts
		run.Summary = fmt.Sprintf("%s; enrolled client listed=%v listener=%v; control untouched=%v", run.Counts(), listed, listener, controlLeft)
		run.Notes = append(run.Notes, fmt.Sprintf("%s/%s has no %s label: %s", w.byNamespace.Namespace, w.byNamespace.Name, contract.KubeProxyLabel, w.nsCut))
		if w.downErr != "" {
			run.Summary += "; agent-down check FAILED: " + w.downErr
		} else {
			run.Notes = append(run.Notes, w.down)
		}
		if len(st.Enrollment.Uncaptured) > 0 {
			run.Notes = append(run.Notes, "enrolled but uncaptured (started before the plugin): "+strings.Join(st.Enrollment.Uncaptured, ", "))
		}
	},
})

func prepareEnroll(ctx context.Context) (enrollWorkload, error) {
	var w enrollWorkload
	c := suite.cluster
	// The plugin for this leg only: put the node DaemonSet back as the suite deployed it
	// afterwards (the enrolled namespace goes first, so its pods' DELs still reach the plugin).
	if err := deployNodeWithCNI(ctx, &manifests.CNIOptions{}); err != nil {
		return w, err
	}
	DeferCleanup(func(ctx SpecContext) error { return deployNodeWithCNI(ctx, nil) }, NodeTimeout(4*time.Minute))
	if err := waitPlugin(ctx, true); err != nil {
		return w, err
	}
	DeferCleanup(func(ctx SpecContext) error { return deleteNamespace(ctx, enrollNS) }, NodeTimeout(3*time.Minute))
	if err := deleteNamespace(ctx, enrollNS); err != nil { // a leftover of an interrupted run
		return w, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enrollNS, Labels: map[string]string{contract.MeshLabel: contract.MeshEnabled}}}
	if err := c.Create(ctx, ns); err != nil {
		return w, err
	}
	var err error
	if w.labelled, err = workload.DeployEcho(ctx, c, suite.legsNS, "enroll", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true}); err != nil {
		return w, err
	}
	// No Cut: the guard cuts it because its namespace is enrolled.
	if w.byNamespace, err = workload.DeployEcho(ctx, c, enrollNS, "nsmode", workload.Backends{Replicas: 2}, workload.ServiceOptions{}); err != nil {
		return w, err
	}
	if w.nsCut, err = guard.WaitCut(ctx, c, w.byNamespace, time.Minute); err != nil {
		return w, fmt.Errorf("the guard's namespace mode: %w", err)
	}
	w.node = c.Workers()[0].Name
	labels := map[string]string{workload.RoleLabel: "enrolled"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: enrollNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: workload.PlainClientSpec(w.node)},
		},
	}
	control := workload.PlainClient(suite.legsNS, "plain-control", w.node, "enroll-control")
	if err := c.Create(ctx, dep, control); err != nil {
		return w, err
	}
	pods, err := c.WaitPodsReady(ctx, enrollNS, workload.RoleLabel+"=enrolled", 1, 3*time.Minute)
	if err != nil {
		return w, err
	}
	w.enrolled = pods[0]
	ctl, err := c.WaitPodsReady(ctx, suite.legsNS, workload.RoleLabel+"=enroll-control", 1, 3*time.Minute)
	if err != nil {
		return w, err
	}
	w.control = &ctl[0]
	if w.down, err = agentDownCheck(ctx, w.node); err != nil {
		w.downErr = err.Error()
	}
	progress("leg enroll: agent down: %s%s", w.down, w.downErr)
	return w, nil
}

// deployNodeWithCNI applies the suite's node DaemonSet with cni (nil: without) and waits until
// every agent answers.
func deployNodeWithCNI(ctx context.Context, cni *manifests.CNIOptions) error {
	objs, err := agent.Objects(agent.Options{Proxy: cfg.Proxy, EnvoyImage: cfg.envoyImage, CNI: cni})
	if err != nil {
		return err
	}
	cluster.StampImageIDs(ctx, objs)
	if err := suite.cluster.Apply(ctx, "node", objs); err != nil {
		return err
	}
	if err := suite.cluster.WaitDaemonSet(ctx, contract.Namespace, contract.NodeDaemonSet, 3*time.Minute); err != nil {
		return err
	}
	if _, err := agent.Statuses(ctx, suite.cluster); err != nil {
		return err
	}
	if cni == nil {
		return waitPlugin(ctx, false)
	}
	return nil
}

// waitPlugin waits until every node has (or has not) the plugin: its binary in the CNI bin
// dir and its entry in the node's conflists.
func waitPlugin(ctx context.Context, want bool) error {
	var last string
	bin := contract.CNIBinDir + "/" + contract.CNIPluginType
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range suite.cluster.Nodes {
			out, err := suite.cluster.NodeExec(ctx, n.Name, "sh", "-c", "cat "+contract.CNIConfDir+"/*.conflist")
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if strings.Contains(out, `"`+contract.CNIPluginType+`"`) != want {
				last = fmt.Sprintf("node %s: conflist entry present=%v", n.Name, !want)
				return false, nil
			}
			out, err = suite.cluster.NodeExec(ctx, n.Name, "sh", "-c", "if [ -e "+bin+" ]; then echo present; fi")
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if (strings.TrimSpace(out) == "present") != want {
				last = fmt.Sprintf("node %s: %s present=%v", n.Name, bin, !want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("svclb-cni on every node=%v: %w (%s)", want, err, last)
	}
	progress("svclb-cni (binary and conflist entry) on every node: %v", want)
	return nil
}

func deleteNamespace(ctx context.Context, name string) error {
	nss := suite.cluster.CS.CoreV1().Namespaces()
	if err := nss.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := nss.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
