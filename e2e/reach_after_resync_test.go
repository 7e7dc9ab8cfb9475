package e2e

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

const (
	// resyncInterval is the spacing of the attempts dialled through the
	// kube-proxy restart.
	resyncInterval = 100 * time.Millisecond
	// resyncAttemptTimeout bounds one of them (workload.AttemptTimeout:
	// what slows a restart is the machine, not the path).
	resyncAttemptTimeout = workload.AttemptTimeout
)

// reach-after-resync: a kube-proxy restart is a full sync that restores the
// Service's objects; the guard must delete them again, and with the agent on
// the Service must stay reachable throughout.
var _ = leg.Define(legs, leg.Leg[*corev1.Service]{
	Name:       "reach-after-resync",
	Early:      true,
	Workloads:  "Service resync (2 echo backends, cut); the first client by name; its node's kube-proxy pod deleted while it dials",
	Exercises:  "pkg/kubeproxyguard/monitor.go, pass.go, cut.go (re-deletion after kube-proxy's full sync); as reach",
	Setup:      "as reach; while a meshed client dials continuously, the kube-proxy pod of its node is deleted (start-up full sync restores the chains)",
	RedExpect:  "the guard re-deletes the restored objects and the Service is unreachable (at most a few replies in the restore window)",
	GreenMeans: "the guard observed the restore and re-deleted it, and every attempt during the restart got a backend's reply",
	Timeout:    6 * time.Minute,
	Chance: fmt.Sprintf("nothing statistical: every attempt through the restart must succeed, each within %s: a kube-proxy restart on a loaded "+
		"2-core machine once stalled one green round trip past 2 s (hello received, echo late): slow, not broken", resyncAttemptTimeout),
	Prepare: func(ctx context.Context) (*corev1.Service, error) {
		return workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "resync", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true})
	},
	// The leg restarts kube-proxy: the restore during the run is its
	// subject; the Service must be cut before and after.
	Services: func(svc *corev1.Service) []measure.Dialled {
		d := measure.ServicePort(svc, 80)
		d.RestartsKubeProxy = true
		return []measure.Dialled{d}
	},
	Measure: func(ctx context.Context, svc *corev1.Service, run *evidence.Run) {
		if err := measureResync(ctx, svc, run); err != nil {
			run.Error = err.Error()
		}
	},
})

// redeletions is the guard's re-deletion count of svc on node and the latency
// of the last one.
func redeletions(ctx context.Context, node string, svc *corev1.Service) (int, float64, error) {
	sts, err := guard.Statuses(ctx, suite.cluster)
	if err != nil {
		return 0, 0, err
	}
	st, ok := sts[node]
	if !ok {
		return 0, 0, fmt.Errorf("no guard on %s", node)
	}
	ss, _ := guard.ServiceStatus(st, svc)
	return ss.Redeletions, ss.LastRedeletionLatencySeconds, nil
}

func measureResync(ctx context.Context, svc *corev1.Service, run *evidence.Run) error {
	client := suite.clients[0]
	node := client.Spec.NodeName
	r0, _, err := redeletions(ctx, node, svc)
	if err != nil {
		return err
	}
	to := workload.Addr(svc, 80)
	captured0, err := measure.CapturedConnections(ctx, suite.cluster, node)
	if err != nil {
		return err
	}
	type dialed struct {
		rs  []echo.Result
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		rs, err := workload.Dial(ctx, suite.cluster, &client, to, workload.DialOptions{Count: 150, Interval: resyncInterval, Timeout: resyncAttemptTimeout})
		done <- dialed{rs, err}
	}()
	// The restart must fall inside the dialling, not before its first
	// attempt: wait until the node's proxy has accepted one.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := measure.CapturedConnections(ctx, suite.cluster, node)
		return err == nil && n > captured0, nil
	})
	if err != nil {
		return fmt.Errorf("the proxy on %s accepted none of the client's connections: %w", node, err)
	}
	pods := suite.cluster.CS.CoreV1().Pods("kube-system")
	onNode := metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy", FieldSelector: "spec.nodeName=" + node}
	kp, err := pods.List(ctx, onNode)
	if err != nil || len(kp.Items) != 1 {
		return fmt.Errorf("kube-proxy pod on %s: %v (found %d)", node, err, len(kp.Items))
	}
	old := kp.Items[0].Name
	t0 := time.Now()
	if err := pods.Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete kube-proxy pod %s: %w", old, err)
	}
	progress("leg reach-after-resync: %s run: deleted %s on %s", run.Mode, old, node)
	var r1 int
	var latency float64
	var restarted time.Duration
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if restarted == 0 {
			if l, err := pods.List(ctx, onNode); err == nil {
				for _, p := range l.Items {
					if p.Name != old && cluster.PodReady(&p) {
						restarted = time.Since(t0)
					}
				}
			}
		}
		r, lat, err := redeletions(ctx, node, svc)
		if err != nil {
			return false, nil
		}
		r1, latency = r, lat
		return restarted > 0 && r1 > r0, nil
	})
	redeleted := r1 > r0
	d := <-done
	if d.err != nil {
		return d.err
	}
	run.Tally(d.rs, suite.cluster.Zone)
	for _, r := range d.rs {
		s := evidence.Sample{At: time.Duration(r.Attempt) * resyncInterval, Stage: "dialling through the restart", Outcome: echo.Outcome(r)}
		if r.Reply != nil {
			s.Backend, s.BackendState = evidence.BackendKey(r.Reply, suite.cluster.Zone), "ready"
		}
		run.Timeline = append(run.Timeline, s)
	}

	cutNote, cutErr := guard.WaitCut(ctx, suite.cluster, svc, 30*time.Second)
	run.Notes = append(run.Notes,
		fmt.Sprintf("kube-proxy on %s back Ready after %s", node, restarted.Round(100*time.Millisecond)),
		fmt.Sprintf("guard on %s: redeletions %d→%d, last re-deletion latency %.1f ms", node, r0, r1, latency*1000))
	if cutErr == nil {
		run.Notes = append(run.Notes, "after: "+cutNote)
	} else {
		run.Notes = append(run.Notes, "after: "+cutErr.Error())
	}
	run.MetGreen = err == nil && redeleted && cutErr == nil && run.Attempts > 0 && run.Replies == run.Attempts
	// Red: the guard did its part, and without the agent the Service is gone
	// again: the last attempts (after the re-deletion) all fail.
	tail := d.rs[max(0, len(d.rs)-10):]
	run.MetRed = redeleted && cutErr == nil && len(d.rs) >= 10 && echo.Replies(tail) == 0
	run.Summary = fmt.Sprintf("%s; guard re-deleted: %v (%d→%d); kube-proxy restart %s", run.Counts(), redeleted, r0, r1, restarted.Round(100*time.Millisecond))
	return nil
}
