package e2e

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

const (
	drainDelay = 60 * time.Second // serving-but-terminating window of a deleted backend
	// settle is the time given to the agent and proxy after the
	// EndpointSlice shows a change and before the leg measures it.
	settle = 2 * time.Second
)

type drainWorkload struct {
	svc *corev1.Service
	to  string
}

// drain: serving-but-terminating endpoints are used only when no ready one
// exists (KEP-1669), never while one does.
var _ = defineLeg(leg{
	name:       "drain",
	setup:      fmt.Sprintf("2 echo backends that stay serving-but-terminating for %s after deletion (preStop sleep, long grace; readiness fails on SIGTERM like netexec --delay-shutdown); deleted one, then the other; kube-proxy objects deleted", drainDelay),
	redExpect:  "no backend reply at any stage",
	greenMeans: "while one ready endpoint exists no connection reaches the terminating one; with none ready, connections reach the terminating ones",
	timeout:    6 * time.Minute,
	prepare: func(ctx context.Context) (any, error) {
		svc := legService("drain", svcOpts{selector: map[string]string{"app": "drain"}, guarded: true})
		if err := create(ctx, svc); err != nil {
			return nil, err
		}
		if _, err := waitCutEverywhere(ctx, svc, time.Minute); err != nil {
			return nil, err
		}
		return &drainWorkload{svc: svc, to: net.JoinHostPort(svc.Spec.ClusterIP, "80")}, nil
	},
	measure: func(ctx context.Context, w any, run *evidence.Run) {
		dw := w.(*drainWorkload)
		if err := drainRun(ctx, dw, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// drainPod is an echo backend that stays serving-but-terminating for
// drainDelay after deletion: a preStop sleep keeps the container untouched
// (readiness still passing: serving=true, ready=false in the EndpointSlice),
// then SIGTERM fails readiness while the server keeps answering a little longer.
func drainPod(name string) *corev1.Pod {
	dep := echoDeployment("drain", backendOpts{replicas: 1, delayShutdown: 5 * time.Second})
	spec := dep.Spec.Template.Spec
	spec.TopologySpreadConstraints = nil
	spec.TerminationGracePeriodSeconds = ptr.To(int64((drainDelay + 30*time.Second).Seconds()))
	spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Sleep: &corev1.SleepAction{Seconds: int64(drainDelay.Seconds())},
	}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: suite.legsNS, Labels: map[string]string{"app": "drain"}}, Spec: spec}
}

func drainRun(ctx context.Context, dw *drainWorkload, run *evidence.Run) error {
	pods := map[string]string{} // name → "ready" | "terminating"
	names := []string{"drain-" + string(run.Mode) + "-a", "drain-" + string(run.Mode) + "-b"}
	for _, n := range names {
		if err := create(ctx, drainPod(n)); err != nil {
			return err
		}
		pods[n] = "ready"
	}
	defer func() {
		// The next run must not see this run's terminating pods.
		for _, n := range names {
			_ = suite.cluster.CS.CoreV1().Pods(suite.legsNS).Delete(context.WithoutCancel(ctx), n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		_ = wait.PollUntilContextTimeout(context.WithoutCancel(ctx), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, n := range names {
				if _, err := suite.cluster.CS.CoreV1().Pods(suite.legsNS).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			return true, nil
		})
	}()
	if _, err := waitPodsReady(ctx, "app=drain", 2, 2*time.Minute); err != nil {
		return err
	}
	if err := waitSlice(ctx, dw.svc.Name, pods); err != nil {
		return err
	}
	client := suite.clients[0]
	for _, c := range suite.clients {
		if c.Spec.NodeName == workers()[0].Name {
			client = c
		}
	}
	okStages := 0
	stage := func(label string, check func(backendState string) bool) error {
		time.Sleep(settle)
		rs, err := dial(ctx, &client, dw.to, dialOpts{count: 15, interval: 40 * time.Millisecond, timeout: 2 * time.Second})
		if err != nil {
			return err
		}
		tally(run, rs)
		good := len(rs) > 0
		for _, r := range rs {
			s := evidence.Sample{At: time.Since(run.Started), Stage: label, Outcome: outcome(r)}
			if r.Reply != nil {
				s.Backend = backendKey(r.Reply)
				s.BackendState = pods[r.Reply.Pod]
			}
			if !r.OK || !check(s.BackendState) {
				good = false
			}
			run.Timeline = append(run.Timeline, s)
		}
		if good {
			okStages++
		}
		progress("leg drain: %s run, stage %q: %d replies of %d", run.Mode, label, countReplies(rs), len(rs))
		return nil
	}
	if err := stage("2 ready", func(st string) bool { return st == "ready" }); err != nil {
		return err
	}
	for i, n := range []string{names[1], names[0]} {
		if err := suite.cluster.CS.CoreV1().Pods(suite.legsNS).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete %s: %w", n, err)
		}
		pods[n] = "terminating"
		if err := waitSlice(ctx, dw.svc.Name, pods); err != nil {
			return err
		}
		if i == 0 {
			// Never the terminating one while a ready one exists.
			if err := stage("1 ready + 1 terminating", func(st string) bool { return st == "ready" }); err != nil {
				return err
			}
		} else {
			// No ready endpoint left: the terminating ones serve.
			if err := stage("0 ready + 2 terminating", func(st string) bool { return st == "terminating" }); err != nil {
				return err
			}
		}
	}
	run.MetGreen = okStages == 3
	run.MetRed = run.Attempts > 0 && run.Replies == 0
	terminatingWhileReady := 0
	for _, s := range run.Timeline {
		if s.Stage == "1 ready + 1 terminating" && s.BackendState == "terminating" {
			terminatingWhileReady++
		}
	}
	run.Summary = fmt.Sprintf("%s; %d/3 stages as required; %d replies from a terminating backend while one was ready", countsSummary(run), okStages, terminatingWhileReady)
	return nil
}

func countReplies(rs []echo.Result) int {
	n := 0
	for _, r := range rs {
		if r.OK {
			n++
		}
	}
	return n
}

// waitSlice waits until the Service's EndpointSlices show every pod in want
// with the right conditions: "ready" (ready) or "terminating" (serving, not
// ready, terminating).
func waitSlice(ctx context.Context, svc string, want map[string]string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := suite.cluster.CS.DiscoveryV1().EndpointSlices(suite.legsNS).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got := map[string]string{}
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				if e.TargetRef == nil {
					continue
				}
				c := e.Conditions
				switch {
				case ptr.Deref(c.Ready, false):
					got[e.TargetRef.Name] = "ready"
				case ptr.Deref(c.Serving, false) && ptr.Deref(c.Terminating, false):
					got[e.TargetRef.Name] = "terminating"
				default:
					got[e.TargetRef.Name] = "neither"
				}
			}
		}
		for p, st := range want {
			if got[p] != st {
				last = fmt.Sprintf("endpoint %s is %q, want %q", p, got[p], st)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("EndpointSlices of %s: %w (%s)", svc, err, last)
	}
	return nil
}
