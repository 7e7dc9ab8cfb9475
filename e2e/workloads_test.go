package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

const (
	echoImage  = "svclb/echo:dev"
	echoPort   = 8080
	healthPort = 8081

	labelKubeProxy = "svclb.dev/kube-proxy"
)

// backendOpts shapes an echo Deployment.
type backendOpts struct {
	replicas int32
	// nodes pins the pods to these nodes (one pod per listed node, in order,
	// via a Deployment per node would be heavier: a required node affinity
	// plus spread keeps it to one Deployment).
	nodes []string
	// delayShutdown keeps a deleted pod serving (not ready) this long.
	delayShutdown time.Duration
}

// echoDeployment is the project's echo server as a backend: it replies with
// pod, node, zone, pod IP and the peer it saw.
func echoDeployment(name string, o backendOpts) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	grace := int64(30)
	if o.delayShutdown > 0 {
		grace = int64((o.delayShutdown + 30*time.Second).Seconds())
	}
	pod := corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{
			Name:            "echo",
			Image:           echoImage,
			ImagePullPolicy: corev1.PullNever,
			Args:            echoServeArgs(o.delayShutdown),
			Env:             identityEnv(),
			Ports:           []corev1.ContainerPort{{Name: "echo", ContainerPort: echoPort}, {Name: "health", ContainerPort: healthPort}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(healthPort)}},
				PeriodSeconds: 1, FailureThreshold: 1,
			},
		}},
		// Spread over nodes so that reach and friends see backends on more
		// than one node.
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		}},
	}
	if len(o.nodes) > 0 {
		pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: o.nodes}},
			}}},
		}}
		pod.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.DoNotSchedule
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: suite.legsNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
}

func echoServeArgs(delay time.Duration) []string {
	return []string{"serve", fmt.Sprintf("-listen=:%d", echoPort), fmt.Sprintf("-health=:%d", healthPort), "-delay-shutdown=" + delay.String()}
}

func identityEnv() []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return []corev1.EnvVar{field("POD_NAME", "metadata.name"), field("NODE_NAME", "spec.nodeName"), field("POD_IP", "status.podIP")}
}

// svcOpts shapes a leg's Service.
type svcOpts struct {
	selector map[string]string // nil: selects nothing
	ports    []int32           // Service ports, all to targetPort echoPort
	guarded  bool              // label svclb.dev/kube-proxy=deleted
	mutate   func(*corev1.Service)
}

func legService(name string, o svcOpts) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: suite.legsNS, Labels: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: o.selector},
	}
	if o.guarded {
		s.Labels[labelKubeProxy] = "deleted"
	}
	if len(o.ports) == 0 {
		o.ports = []int32{80}
	}
	for i, p := range o.ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: corev1.ProtocolTCP, Port: p, TargetPort: intstr.FromInt32(echoPort)})
	}
	if o.mutate != nil {
		o.mutate(s)
	}
	return s
}

// meshedClient is a meshed pod pinned to a node: the fixtures' capture init
// container diverts its TCP to the node proxy; the app container idles and the
// legs exec `svclb-echo dial` in it.
func meshedClient(name, node string) *corev1.Pod {
	return meshed(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: suite.legsNS, Labels: map[string]string{"role": "client"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           echoImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"idle"},
				Env:             identityEnv(),
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	})
}

// apply creates objects, replacing none: every leg starts in a fresh namespace.
func create(ctx context.Context, objs ...any) error {
	cs := suite.cluster.CS
	for _, o := range objs {
		var err error
		switch x := o.(type) {
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
		case *corev1.Service:
			var got *corev1.Service
			got, err = cs.CoreV1().Services(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
			if err == nil {
				*x = *got // callers need the ClusterIP
			}
		case *corev1.Pod:
			_, err = cs.CoreV1().Pods(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("create: unsupported %T", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T: %w", o, err)
		}
	}
	return nil
}

// waitPodsReady waits until n pods match selector in the legs namespace and
// are Ready, and returns them.
func waitPodsReady(ctx context.Context, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := suite.cluster.CS.CoreV1().Pods(suite.legsNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = pods[:0]
		var states []string
		for _, p := range l.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if podReady(&p) {
				pods = append(pods, p)
			} else {
				states = append(states, p.Name+"="+podState(&p))
			}
		}
		last = fmt.Sprintf("%d/%d ready; not ready: %s", len(pods), n, strings.Join(states, ", "))
		return len(pods) == n && len(states) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pods %q: %w (%s)", selector, err, last)
	}
	return pods, nil
}

// podState is a short reason a pod is not ready, for progress and errors.
func podState(p *corev1.Pod) string {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil {
			return s.Name + ":" + w.Reason
		}
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("%s:exit %d", s.Name, t.ExitCode)
		}
	}
	return string(p.Status.Phase)
}

// deployEcho creates an echo Deployment and a Service selecting it, waits for
// the backends to be ready and, for a guarded Service, for its kube-proxy
// objects to be gone on every node. The returned Service carries its ClusterIP.
func deployEcho(ctx context.Context, name string, b backendOpts, s svcOpts) (*corev1.Service, error) {
	dep := echoDeployment(name, b)
	s.selector = dep.Spec.Selector.MatchLabels
	svc := legService(name, s)
	if err := create(ctx, dep, svc); err != nil {
		return nil, err
	}
	if _, err := waitPodsReady(ctx, "app="+name, int(b.replicas), 2*time.Minute); err != nil {
		return nil, err
	}
	if s.guarded {
		note, err := waitCutEverywhere(ctx, svc, time.Minute)
		if err != nil {
			return nil, err
		}
		progress("%s", note)
	}
	return svc, nil
}
