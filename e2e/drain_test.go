package e2e

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// drainDelay is how long a deleted backend stays serving-but-terminating:
// longer than two stages that each wait out drainSettleWithin.
const drainDelay = 2 * time.Minute

// drainSettleWithin bounds the wait for kube-proxy's sync of a stage's
// change: after a failed sync kube-proxy retries in its syncPeriod (30 s
// here) unless another change comes first.
const drainSettleWithin = 45 * time.Second

// The drain leg's stages, as its timeline names them.
const (
	stageTwoReady    = "2 ready"
	stageOneEach     = "1 ready + 1 terminating"
	stageTerminating = "0 ready + 2 terminating"
)

type drainWorkload struct {
	svc *corev1.Service
	to  string
}

// drain: serving-but-terminating endpoints are used only when no ready one
// exists (KEP-1669), never while one does.
var _ = leg.Define(legs, leg.Leg[*drainWorkload]{
	Name:  "drain",
	Early: true,
	Workloads: "Service drain (cut); per run 2 echo pods staying serving-but-terminating 2 min after deletion, deleted one then the other, each " +
		"stage dialled once the agent and kube-proxy have both programmed it; the client on the first worker",
	Exercises: "internal/translate/endpoints.go (SelectEndpoints: terminating endpoints in bands after every ready one), " +
		"internal/translate/cluster.go (LoadAssignment priorities), nodeproxy/internal/lb/priority.go",
	Setup:      fmt.Sprintf("2 echo backends that stay serving-but-terminating for %s after deletion (preStop sleep, long grace; readiness fails on SIGTERM like netexec --delay-shutdown); deleted one, then the other; kube-proxy ClusterIP entries deleted", drainDelay),
	RedExpect:  "no backend reply at any stage",
	GreenMeans: "while one ready endpoint exists no connection reaches the terminating one; with none ready, connections reach the terminating ones",
	Timeout:    8 * time.Minute,
	Chance: fmt.Sprintf("nothing statistical: every attempt of every stage must reach a backend in the stage's state, each within %s "+
		"(workload.AttemptTimeout); each stage starts once every node's proxy serves the stage's endpoints and every node's kube-proxy has synced the change (the guard having cut again what the sync restored)", workload.AttemptTimeout),
	Services: func(dw *drainWorkload) []measure.Dialled { return []measure.Dialled{measure.ServicePort(dw.svc, 80)} },
	Prepare: func(ctx context.Context) (*drainWorkload, error) {
		svc := workload.Service(suite.legsNS, "drain", workload.ServiceOptions{Selector: map[string]string{workload.AppLabel: "drain"}, Cut: true})
		if err := suite.cluster.Create(ctx, svc); err != nil {
			return nil, err
		}
		if _, err := guard.WaitCut(ctx, suite.cluster, svc, time.Minute); err != nil {
			return nil, err
		}
		return &drainWorkload{svc: svc, to: workload.Addr(svc, 80)}, nil
	},
	Measure: func(ctx context.Context, dw *drainWorkload, run *evidence.Run) {
		if err := measureDrain(ctx, dw, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// drainPod is an echo backend that stays serving-but-terminating for
// drainDelay after deletion: a preStop sleep keeps the container untouched
// (readiness still passing: serving=true, ready=false in the EndpointSlice),
// then SIGTERM fails readiness while the server keeps answering a little longer.
func drainPod(name string) *corev1.Pod {
	dep := workload.EchoDeployment(suite.legsNS, "drain", workload.Backends{Replicas: 1, DelayShutdown: 5 * time.Second})
	spec := dep.Spec.Template.Spec
	spec.TopologySpreadConstraints = nil
	spec.TerminationGracePeriodSeconds = ptr.To(int64((drainDelay + 30*time.Second).Seconds()))
	spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Sleep: &corev1.SleepAction{Seconds: int64(drainDelay.Seconds())},
	}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: suite.legsNS, Labels: dep.Spec.Template.Labels}, Spec: spec}
}

// drainProgrammed waits until the Service's EndpointSlices show the pods
// in the states of pods, then until every node's proxy serves those
// endpoints (measure.WaitProgrammed: with Phase 1 on, each ready one in the
// first priority and each terminating one after them; with it off, no svc:
// cluster at all), and until every node's kube-proxy has synced the change
// made at since and the guard has cut what that sync put back: a stage
// dials only once both data planes have settled, so no red attempt lands
// in the moment a kube-proxy sync restored the Service.
func drainProgrammed(ctx context.Context, dw *drainWorkload, pods map[string]string, since time.Time) error {
	if err := workload.WaitEndpoints(ctx, suite.cluster, suite.legsNS, dw.svc.Name, pods); err != nil {
		return err
	}
	d, err := measure.WaitProgrammed(ctx, suite.cluster, []measure.Dialled{measure.ServicePort(dw.svc, 80)})
	if err != nil {
		return err
	}
	k, err := guard.WaitKubeProxySynced(ctx, suite.cluster, dw.svc, since, drainSettleWithin)
	if err != nil {
		return err
	}
	progress("leg drain: endpoints %v served by every node's proxy after %s, kube-proxy synced and the Service cut again %s later",
		pods, d.Round(10*time.Millisecond), k.Round(10*time.Millisecond))
	return nil
}

func measureDrain(ctx context.Context, dw *drainWorkload, run *evidence.Run) error {
	pods := map[string]string{} // name → workload.EndpointReady | EndpointTerminating
	names := []string{"drain-" + string(run.Mode) + "-a", "drain-" + string(run.Mode) + "-b"}
	created := time.Now()
	for _, n := range names {
		if err := suite.cluster.Create(ctx, drainPod(n)); err != nil {
			return err
		}
		pods[n] = workload.EndpointReady
	}
	defer func() {
		// The next run must not see this run's terminating pods.
		ctx := context.WithoutCancel(ctx)
		client := suite.cluster.CS.CoreV1().Pods(suite.legsNS)
		for _, n := range names {
			_ = client.Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, n := range names {
				if _, err := client.Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			return true, nil
		})
	}()
	if _, err := suite.cluster.WaitPodsReady(ctx, suite.legsNS, workload.AppLabel+"=drain", 2, 2*time.Minute); err != nil {
		return err
	}
	if err := drainProgrammed(ctx, dw, pods, created); err != nil {
		return err
	}
	client := suite.clients[0]
	if c := suite.clientOn(suite.cluster.Workers()[0].Name); c != nil {
		client = *c
	}
	okStages := 0
	// stage dials from the client and counts the stage as met when every
	// attempt got a reply from a backend in state want.
	stage := func(label, want string) error {
		rs, err := workload.Dial(ctx, suite.cluster, &client, dw.to, workload.DialOptions{Count: 15, Interval: 40 * time.Millisecond, Timeout: workload.AttemptTimeout})
		if err != nil {
			return err
		}
		run.Tally(rs, suite.cluster.Zone)
		good := len(rs) > 0
		for _, r := range rs {
			s := evidence.Sample{At: time.Since(run.Started), Stage: label, Outcome: echo.Outcome(r)}
			if r.Reply != nil {
				s.Backend = evidence.BackendKey(r.Reply, suite.cluster.Zone)
				s.BackendState = pods[r.Reply.Pod]
			}
			if !r.OK || s.BackendState != want {
				good = false
			}
			run.Timeline = append(run.Timeline, s)
		}
		if good {
			okStages++
		}
		progress("leg drain: %s run, stage %q: %d replies of %d", run.Mode, label, echo.Replies(rs), len(rs))
		return nil
	}
	if err := stage(stageTwoReady, workload.EndpointReady); err != nil {
		return err
	}
	// Never the terminating one while a ready one exists; with no ready
	// endpoint left, the terminating ones serve.
	for i, st := range []struct{ pod, label, want string }{
		{names[1], stageOneEach, workload.EndpointReady},
		{names[0], stageTerminating, workload.EndpointTerminating},
	} {
		deleted := time.Now()
		if err := suite.cluster.CS.CoreV1().Pods(suite.legsNS).Delete(ctx, st.pod, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete %s (deletion %d): %w", st.pod, i+1, err)
		}
		pods[st.pod] = workload.EndpointTerminating
		if err := drainProgrammed(ctx, dw, pods, deleted); err != nil {
			return err
		}
		if err := stage(st.label, st.want); err != nil {
			return err
		}
	}
	run.MetGreen = okStages == 3
	run.MetRed = run.Attempts > 0 && run.Replies == 0
	terminatingWhileReady := 0
	for _, s := range run.Timeline {
		if s.Stage == stageOneEach && s.BackendState == workload.EndpointTerminating {
			terminatingWhileReady++
		}
	}
	run.Summary = fmt.Sprintf("%s; %d/3 stages as required; %d replies from a terminating backend while one was ready", run.Counts(), okStages, terminatingWhileReady)
	return nil
}
