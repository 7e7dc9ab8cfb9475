package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/e2e/internal/measure"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/workload"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// leg is one acceptance leg, with every text about it: the report
// restates some, docs/legs.md is generated from them (legs_doc_test.go).
// W is what its prepare hands its measure.
type leg[W any] struct {
	name       string
	setup      string // restated in the report
	redExpect  string
	greenMeans string
	// workloads names what the leg deploys and who dials it; exercises
	// names the agent and proxy code it exercises beyond the path every
	// leg takes. Both are docs/legs.md's alone.
	workloads string
	exercises string
	// prepare deploys the leg's workloads once for both runs and returns
	// what measure needs.
	prepare func(ctx context.Context) (W, error)
	// measure observes one run. It fills the counts and sets MetRed and
	// MetGreen from what it saw, never from the mode it runs in: a red run
	// is judged by the same green condition as the green run.
	measure func(ctx context.Context, w W, run *evidence.Run)
	// control marks a leg whose red and green must look the same (passthrough:
	// the Phase flags must not change traffic outside the Service range); it
	// passes when both runs meet the green condition.
	control bool
	// agentConfig, when set, gives more keys of the agent's ConfigMap per run
	// (on: the green run), applied together with the Phase flags. The red
	// run's values are restored after the leg, pass or fail: the other legs
	// share the cluster.
	agentConfig func(on bool) map[string]string
	timeout     time.Duration
	// services declares what the leg dials (e2e/doc.go, "Evidence"): the
	// Services and addresses whose per-node proxy counters, agent refusals,
	// refusal log records and kube-proxy cut the suite reads around each
	// run and judges with the leg's own measure. nil: the leg dials nothing
	// in the Service range (passthrough).
	services func(w W) []measure.Dialled
	// chance says what in the leg can fail by chance: the per-attempt
	// timeout it dials with and why, and the false-failure odds of any
	// statistical check. The report restates it.
	chance string
	// early: prepare may run in the background from the suite's start
	// (early_test.go), while the legs before this one run. Only for a
	// prepare that deploys workloads of its own: it picks no address (a
	// Service created meanwhile could take it), changes nothing the other
	// legs share, and calls no DeferCleanup.
	early bool
}

// registered is a leg defineLeg has seen, waiting for its place in the order.
type registered struct {
	name string
	// file is the leg's file, where defineLeg was called.
	file string
	// The leg's texts that docs/legs.md shows, and whether it is a control
	// leg.
	workloads, exercises, redExpect, greenMeans string
	control                                     bool
	// define puts the leg's container into the tree with priority.
	define func(priority int)
	// early schedules the leg's prepare for the background and returns
	// what runs it (nil: the leg is not marked early).
	early func() func()
}

var (
	// legs are the legs: in definition order until init puts them in
	// legOrder, and so into the tree.
	legs []registered
	// probe is the probe of the leg that runs (one at a time), for
	// beforeNodeRestart.
	probe *measure.Probe
)

// defineLeg registers a leg. Its Ginkgo container is made by init, once
// every leg is known, so the order the legs run in is fixed (below).
func defineLeg[W any](l leg[W]) bool {
	if l.timeout == 0 {
		l.timeout = 4 * time.Minute
	}
	// The caller is the leg's file, which no field has to name.
	_, file, _, _ := runtime.Caller(1)
	r := registered{name: l.name, file: filepath.Base(file), workloads: l.workloads, exercises: l.exercises,
		redExpect: l.redExpect, greenMeans: l.greenMeans, control: l.control}
	var st *earlyStarter[W]
	if l.early {
		st = &earlyStarter[W]{}
		r.early = func() func() { return st.schedule(l.name, l.prepare) }
	}
	r.define = func(prio int) { describeLeg(l, prio, st) }
	legs = append(legs, r)
	return true
}

// init puts the legs into the tree in legOrder (legs_test.go), each with a
// SpecPriority that fixes its place: Ginkgo shuffles top-level containers
// by the random seed and then orders them stably by priority
// (internal/ordering.go OrderSpecs), so distinct priorities make the order
// the same in every run. Legs that disturb the cluster (reach-after-resync
// restarts a kube-proxy, on-demand a node pod) cannot land inside another
// leg's run, and each waits until what it disturbed is back before it ends.
// The programming figure, with no priority, runs after every leg. Package
// variables are initialized before any init function, so every defineLeg
// has run by now. A leg legOrder does not list, or a name it lists that no
// file defines, panics here: the suite cannot start with either.
func init() {
	ordered, err := inLegOrder(legs, legOrder)
	if err != nil {
		panic("e2e: the legs and legOrder disagree:\n" + err.Error())
	}
	legs = ordered
	for i, l := range legs {
		l.define(len(legs) - i)
	}
}

// describeLeg makes a leg one Ordered container labelled "leg" and the
// leg's name: BeforeAll prepares the workloads (or waits for the prepare
// st started in the background), one spec runs red then green.
func describeLeg[W any](l leg[W], priority int, st *earlyStarter[W]) {
	Describe("leg "+l.name, Ordered, Label(evidence.LegLabel, l.name), SpecPriority(priority), func() {
		var w W
		var p *measure.Probe
		BeforeAll(func(ctx SpecContext) {
			t0 := time.Now()
			var err error
			if st != nil && st.p != nil {
				progress("leg %s: waiting for its prepare, started in the background", l.name)
				w, err = st.p.wait(ctx)
			} else if err = waitEarlyDone(ctx); err == nil {
				progress("leg %s: preparing workloads", l.name)
				w, err = l.prepare(ctx)
			}
			Expect(err).NotTo(HaveOccurred(), "prepare leg %s", l.name)
			var dialled []measure.Dialled
			if l.services != nil {
				dialled = l.services(w)
			}
			p = measure.NewProbe(suite.cluster, dialled)
			_ = suite.evidence.AddPhase("leg "+l.name+" prepare", time.Since(t0))
		}, NodeTimeout(l.timeout))

		It("is red with the agent's Phase flags off and green with them on", func(ctx SpecContext) {
			t0 := time.Now()
			probe = p
			DeferCleanup(func() { probe = nil })
			if l.agentConfig != nil {
				DeferCleanup(func(ctx SpecContext) {
					Expect(setAgentConfig(ctx, l.agentConfig(false))).To(Succeed(), "leg %s: restoring the agent's config", l.name)
				}, NodeTimeout(2*time.Minute))
			}
			rec := &evidence.Leg{Name: l.name, Setup: l.setup, RedExpect: l.redExpect, GreenMeans: l.greenMeans, Chance: l.chance}
			for _, d := range p.Dialled() {
				rec.Dialled = append(rec.Dialled, d.String())
			}
			for _, mode := range []evidence.Mode{evidence.Red, evidence.Green} {
				on := mode == evidence.Green
				want := phases(on)
				if l.agentConfig != nil {
					maps.Copy(want, l.agentConfig(on))
				}
				progress("leg %s: %s run: setting %s", l.name, mode, agent.Describe(want))
				run := &evidence.Run{Mode: mode, Started: time.Now()}
				if err := startRun(ctx, l.name, want, p, run); err != nil {
					run.Error = err.Error()
				} else {
					l.measure(ctx, w, run)
					if err := p.Finish(ctx, run); err != nil && run.Error == "" {
						run.Error = "evidence: " + err.Error()
					}
				}
				run.Duration = time.Since(run.Started)
				progress("leg %s: %s run: %s (%s)", l.name, mode, run.Summary, run.Duration.Round(100*time.Millisecond))
				for _, c := range run.Failing(mode) {
					progress("leg %s: %s run: check failed: %s", l.name, mode, c.String(mode))
				}
				_ = suite.evidence.AddPhase(fmt.Sprintf("leg %s %s", l.name, mode), run.Duration)
				if mode == evidence.Red {
					rec.Red = run
				} else {
					rec.Green = run
				}
			}
			if l.control {
				rec.Verdict, rec.Reason = evidence.JudgeControl(rec.Red, rec.Green)
			} else {
				rec.Verdict, rec.Reason = evidence.Judge(rec.Red, rec.Green)
			}
			rec.Duration = time.Since(t0)
			AddReportEntry("leg "+l.name, rec, ReportEntryVisibilityNever)
			Expect(suite.evidence.WriteLeg(rec)).To(Succeed())
			progress("leg %s: %s — %s", l.name, rec.Verdict, rec.Reason)
			Expect(rec.Verdict).To(Equal(evidence.Pass), "leg %s: %s", l.name, rec.Reason)
		}, NodeTimeout(l.timeout))
	})
}

// startRun sets the agent's config for a run, waits until every node's
// proxy serves it (the proxy's own config dump, not a fixed settle), and
// starts the probe.
func startRun(ctx context.Context, name string, want map[string]string, p *measure.Probe, run *evidence.Run) error {
	if err := setAgentConfig(ctx, want); err != nil {
		return err
	}
	d, err := measure.WaitProgrammed(ctx, suite.cluster, p.Dialled())
	if err != nil {
		return err
	}
	progress("leg %s: %s run: every node's proxy serves it (%s)", name, run.Mode, d.Round(10*time.Millisecond))
	run.Notes = append(run.Notes, fmt.Sprintf("every node's proxy served the agent's config %s after %s", agent.Describe(want), d.Round(10*time.Millisecond)))
	return p.Start(ctx)
}

// beforeNodeRestart is what a leg calls right before it restarts the node
// DaemonSet's pod on node: the probe banks that node's counters, which the
// new pod's proxy and agent start again from 0.
func beforeNodeRestart(ctx context.Context, node string) error {
	if probe == nil {
		return nil
	}
	return probe.BeforeRestart(ctx, node)
}

// phases is both Phase flags of the agent's ConfigMap, on or off.
func phases(on bool) map[string]string {
	return map[string]string{contract.KeyPhase1: strconv.FormatBool(on), contract.KeyPhase2: strconv.FormatBool(on)}
}

// setAgentConfig sets keys of the agent's ConfigMap and waits until every
// node's agent applied them.
func setAgentConfig(ctx context.Context, want map[string]string) error {
	t0 := time.Now()
	if err := agent.SetConfig(ctx, suite.cluster, want); err != nil {
		return err
	}
	progress("agent config %s applied on every node in %s", agent.Describe(want), time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// allSucceed is the chance of a leg whose every attempt must succeed.
var allSucceed = fmt.Sprintf("nothing statistical: every attempt must succeed, each within %s (workload.AttemptTimeout: "+
	"milliseconds through the proxy; the bound keeps an attempt a loaded 2-core machine stalled, path intact, a success)", workload.AttemptTimeout)

// refuseLeg makes l a refusal leg: l's prepare finds what to dial, and the
// measure (measure.Refusal) expects the proxy to refuse every attempt with
// reason; the target is declared with reason for the evidence. l names the
// leg and gives its setup, workloads and exercises (and early); refuseLeg
// sets what every refusal leg shares.
func refuseLeg(reason string, l leg[measure.Target]) leg[measure.Target] {
	prepare := l.prepare
	l.redExpect = measure.RedExpect
	l.greenMeans = measure.GreenMeans(reason)
	l.chance = measure.RefusalChance
	l.prepare = func(ctx context.Context) (measure.Target, error) {
		t, err := prepare(ctx)
		t.Reason = reason
		return t, err
	}
	l.measure = func(ctx context.Context, t measure.Target, run *evidence.Run) {
		measure.Refusal(ctx, suite.cluster, suite.clients, t, run)
	}
	l.services = func(t measure.Target) []measure.Dialled { return []measure.Dialled{t.Dialled()} }
	return l
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// sanitize makes a spec's text a directory name.
func sanitize(s string) string {
	s = strings.Trim(unsafe.ReplaceAllString(s, "-"), "-")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
