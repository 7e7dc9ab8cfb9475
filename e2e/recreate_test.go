package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/measure"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The recreate leg's dialling: one client dials the old VIP throughout the
// deletion and re-creation (recreateDials attempts, recreateInterval apart),
// then every client dials the old VIP recreateRefusals times at once and the
// new one.
const (
	recreateDials    = 20
	recreateInterval = 300 * time.Millisecond
	// recreateTimeout is each attempt's: a red attempt to a VIP nobody holds
	// any more meets no REJECT (kube-proxy dropped it with the Service) and
	// waits for it.
	recreateTimeout  = time.Second
	recreateRefusals = 3
)

// recreateWorkload is the Service rec and the two ClusterIPs it takes: old
// at the start of each run, new after the run re-created it. Fixed
// addresses keep what the leg dials the same in both runs (the evidence
// is declared once); each run ends by putting rec back on old.
type recreateWorkload struct {
	svc      *corev1.Service
	old, new string // ClusterIPs
}

func (w *recreateWorkload) oldTo() string { return net.JoinHostPort(w.old, "80") }
func (w *recreateWorkload) newTo() string { return net.JoinHostPort(w.new, "80") }

// recreate: a Service deleted and created again gets a new ClusterIP; the
// old one is no Service's any more.
var _ = leg.Define(legs, leg.Leg[*recreateWorkload]{
	Name:  "recreate",
	Needs: leg.Needs{Workers: 1},
	Workloads: "Service rec (2 echo backends, cut) at a chosen ClusterIP, deleted and created again at another while the client on the first " +
		"worker dials the old VIP; put back after each run",
	Exercises: "agent/batch.go (a deleted Service's clusters and assignments withdrawn), pkg/svcindex/index.go (Lookup: the old VIP is " +
		"no-service), agent/internal/xdsserver/server.go (Classify)",
	Setup: fmt.Sprintf("ClusterIP Service rec (2 echo backends, kube-proxy ClusterIP entries deleted) at a chosen ClusterIP, deleted and created again at another "+
		"while the meshed client on the first worker dials the old VIP (%d attempts %s apart); then every client dials the old VIP ×%d and the new one; "+
		"rec is put back on the old VIP after each run", recreateDials, recreateInterval, recreateRefusals),
	RedExpect: "no reply from either VIP and nothing counted refused (Phase flags off)",
	GreenMeans: fmt.Sprintf("the dialling client gets replies until its proxy drops the old cluster and refusals after it, never a reply again and never a timeout; "+
		"no proxy holds svc:<old VIP>:80 any more and every proxy holds svc:<new VIP>:80; every attempt to the old VIP after the removal is refused and "+
		"counted %s{reason=%q} (no other reason, nothing for the Service), with a log record; every attempt to the new VIP replies", agent.RefusedMetric, agent.ReasonNoService),
	Chance: fmt.Sprintf("green: the dialling client's switch from replies to refusals must fall inside its %d attempts (%s): the deletion starts once 2 reached the proxy; "+
		"each attempt %s (red's to a VIP nobody holds wait it out), the new VIP's %s", recreateDials, recreateDials*recreateInterval, recreateTimeout, workload.AttemptTimeout),
	Timeout: 6 * time.Minute,
	Prepare: func(ctx context.Context) (*recreateWorkload, error) {
		// A kept cluster holds the last suite's rec: start from none.
		if err := suite.cluster.DeleteService(ctx, suite.legsNS, "rec", time.Minute); err != nil {
			return nil, err
		}
		ips, err := suite.cluster.FreeServiceIPs(ctx, 2)
		if err != nil {
			return nil, err
		}
		w := &recreateWorkload{old: ips[0].String(), new: ips[1].String()}
		if w.svc, err = workload.DeployEcho(ctx, suite.cluster, suite.legsNS, "rec", workload.Backends{Replicas: 2}, workload.ServiceOptions{Cut: true,
			Mutate: func(s *corev1.Service) { s.Spec.ClusterIP = w.old }}); err != nil {
			return nil, err
		}
		return w, nil
	},
	Services: func(w *recreateWorkload) []measure.Dialled {
		rec := measure.ServicePort(w.svc, 80)
		rec.To = w.newTo()
		// kube-proxy programs the re-created Service and the guard cuts it
		// during the run: that is the leg's subject, not a fault.
		rec.RestartsKubeProxy = true
		return []measure.Dialled{rec, {To: w.oldTo(), Reason: agent.ReasonNoService}}
	},
	Measure: func(ctx context.Context, w *recreateWorkload, run *evidence.Run) {
		err := measureRecreate(ctx, w, run)
		// The next run starts from rec on the old VIP again.
		if _, rerr := moveService(context.WithoutCancel(ctx), w, w.old); rerr != nil && err == nil {
			err = fmt.Errorf("putting rec back on %s: %w", w.old, rerr)
		}
		if err != nil && run.Error == "" {
			run.Error = err.Error()
		}
	},
})

// moveService deletes rec and creates it again at ip, waiting until the
// guard cut the new VIP on every node.
func moveService(ctx context.Context, w *recreateWorkload, ip string) (string, error) {
	if err := suite.cluster.DeleteService(ctx, w.svc.Namespace, w.svc.Name, time.Minute); err != nil {
		return "", err
	}
	fresh := workload.Service(w.svc.Namespace, w.svc.Name, workload.ServiceOptions{Selector: w.svc.Spec.Selector, Cut: true,
		Mutate: func(s *corev1.Service) { s.Spec.ClusterIP = ip }})
	created, err := suite.cluster.CreateService(ctx, fresh, time.Minute)
	if err != nil {
		return "", err
	}
	w.svc = created
	return guard.WaitCutVIP(ctx, suite.cluster, created, time.Minute)
}

func measureRecreate(ctx context.Context, w *recreateWorkload, run *evidence.Run) error {
	clients := suite.clients
	dialler := suite.clientOn(suite.cluster.Workers()[0].Name)
	if dialler == nil {
		return fmt.Errorf("no meshed client on %s", suite.cluster.Workers()[0].Name)
	}
	node := dialler.Spec.NodeName
	oldCluster, newCluster := contract.ClusterPrefix+w.oldTo(), contract.ClusterPrefix+w.newTo()
	captured0, err := measure.CapturedConnections(ctx, suite.cluster, node)
	if err != nil {
		return err
	}

	// The client dials the old VIP throughout.
	type dialled struct {
		rs  []echo.Result
		err error
	}
	done := make(chan dialled, 1)
	go func() {
		rs, err := workload.Dial(ctx, suite.cluster, dialler, w.oldTo(),
			workload.DialOptions{Count: recreateDials, Interval: recreateInterval, Timeout: recreateTimeout})
		done <- dialled{rs, err}
	}()
	// The deletion must fall inside the dialling: wait until the client's
	// proxy has accepted two of its connections.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := measure.CapturedConnections(ctx, suite.cluster, node)
		return err == nil && n-captured0 >= 2, nil
	})
	if err != nil {
		<-done
		return fmt.Errorf("the client's dialling never reached its proxy: %w", err)
	}
	t0 := time.Now()
	cutNote, err := moveService(ctx, w, w.new)
	if err != nil {
		<-done
		return err
	}
	progress("leg recreate: %s run: %s/%s recreated, ClusterIP %s → %s", run.Mode, w.svc.Namespace, w.svc.Name, w.old, w.new)
	// Every proxy drops the old cluster and serves the new Service as its
	// agent emits it (the same signal as the run's start).
	if _, err := measure.WaitProgrammed(ctx, suite.cluster, []measure.Dialled{measure.ServicePort(w.svc, 80)}); err != nil {
		<-done
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range suite.cluster.Nodes {
			d, err := proxy.ConfigDump(ctx, suite.cluster, n.Name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			held, err := proxy.Clusters(d)
			if err != nil || held[oldCluster] {
				last = fmt.Sprintf("%s still holds %s (%v)", n.Name, oldCluster, err)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		<-done
		return fmt.Errorf("proxies did not drop %s: %w (last: %s)", oldCluster, err, last)
	}
	replaced := time.Since(t0)
	d := <-done
	if d.err != nil {
		return d.err
	}
	run.Tally(d.rs, suite.cluster.Zone)
	// replies then refusals: once refused, never answered again; no attempt
	// left waiting.
	replies, refusedAfter, switched, orderly := 0, 0, false, true
	for _, r := range d.rs {
		o := echo.Outcome(r)
		s := evidence.Sample{At: time.Duration(r.Attempt-1) * recreateInterval, Stage: "dialling the old VIP through the re-creation", Outcome: o}
		if r.Reply != nil {
			s.Backend = evidence.BackendKey(r.Reply, suite.cluster.Zone)
		}
		run.Timeline = append(run.Timeline, s)
		switch {
		case o == echo.OutcomeReply && !switched:
			replies++
		case o == echo.OutcomeProxyClosed:
			switched = true
			refusedAfter++
		default:
			orderly = false
		}
	}
	dialling := replies > 0 && refusedAfter > 0 && orderly

	// Then the old VIP from every client at once, and the new one.
	var jobs []workload.DialJob
	for i := range clients {
		for range recreateRefusals {
			jobs = append(jobs, workload.DialJob{Client: &clients[i], To: w.oldTo(), Opts: workload.DialOptions{Count: 1, Timeout: recreateTimeout}})
		}
	}
	rss, err := workload.DialAll(ctx, suite.cluster, jobs, len(jobs))
	if err != nil {
		return err
	}
	oldRefused := 0
	for _, rs := range rss {
		run.Tally(rs, suite.cluster.Zone)
		for _, r := range rs {
			if echo.Outcome(r) == echo.OutcomeProxyClosed {
				oldRefused++
			}
		}
	}
	per := measure.FromEveryClient(ctx, suite.cluster, clients, w.newTo(), workload.Quick, run)
	if per == nil {
		return nil
	}
	newAttempts, newReplies := 0, 0
	for _, rs := range per {
		newAttempts += len(rs)
		newReplies += echo.Replies(rs)
	}
	run.MetGreen = dialling && oldRefused == len(jobs) && newAttempts > 0 && newReplies == newAttempts
	run.MetRed = run.Attempts > 0 && run.Replies == 0
	run.Summary = fmt.Sprintf("%s; old VIP while recreated: %d replies then %d refusals, in order: %v; old VIP after: %d/%d refused; new VIP: %d/%d replies",
		run.Counts(), replies, refusedAfter, orderly, oldRefused, len(jobs), newReplies, newAttempts)
	run.Notes = append(run.Notes,
		fmt.Sprintf("%s/%s: %s → %s; %s after the deletion began (the guard's cut of the new VIP included) every proxy served %s and none held %s",
			w.svc.Namespace, w.svc.Name, w.old, w.new, replaced.Round(100*time.Millisecond), newCluster, oldCluster), cutNote)
	if outcomes := outcomeRuns(d.rs); len(outcomes) > 0 {
		run.Notes = append(run.Notes, "old VIP while recreated: "+outcomes)
	}
	return nil
}

// outcomeRuns spells a sequence of results as runs of one outcome: "5 reply,
// 25 proxy-closed".
func outcomeRuns(rs []echo.Result) string {
	var parts []string
	for i := 0; i < len(rs); {
		o, j := echo.Outcome(rs[i]), i
		for j < len(rs) && echo.Outcome(rs[j]) == o {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d %s", j-i, o))
		i = j
	}
	return strings.Join(parts, ", ")
}
