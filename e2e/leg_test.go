package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/e2e/internal/measure"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// settle is the time given to the agent and the proxy after a change is
// visible (the agent's /status shows a flip, an EndpointSlice shows a pod's
// new state) and before a leg measures it: the proxy applies the pushed
// snapshot a moment after the agent reports it.
const settle = 2 * time.Second

// leg is one acceptance leg (e2e/doc.go lists them); W is what its prepare
// hands its measure.
type leg[W any] struct {
	name       string
	setup      string // restated in the report
	redExpect  string
	greenMeans string
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
}

// defineLeg registers a leg as one Ordered container labelled with the leg's
// name: BeforeAll prepares the workloads, one spec runs red then green.
func defineLeg[W any](l leg[W]) bool {
	if l.timeout == 0 {
		l.timeout = 4 * time.Minute
	}
	return Describe("leg "+l.name, Ordered, Label(l.name), func() {
		var w W
		BeforeAll(func(ctx SpecContext) {
			progress("leg %s: preparing workloads", l.name)
			t0 := time.Now()
			var err error
			w, err = l.prepare(ctx)
			Expect(err).NotTo(HaveOccurred(), "prepare leg %s", l.name)
			_ = suite.evidence.AddPhase("leg "+l.name+" prepare", time.Since(t0))
		}, NodeTimeout(l.timeout))

		It("is red with the agent's Phase flags off and green with them on", func(ctx SpecContext) {
			t0 := time.Now()
			if l.agentConfig != nil {
				DeferCleanup(func(ctx SpecContext) {
					Expect(setAgentConfig(ctx, l.agentConfig(false))).To(Succeed(), "leg %s: restoring the agent's config", l.name)
				}, NodeTimeout(2*time.Minute))
			}
			rec := &evidence.Leg{Name: l.name, Setup: l.setup, RedExpect: l.redExpect, GreenMeans: l.greenMeans}
			for _, mode := range []evidence.Mode{evidence.Red, evidence.Green} {
				on := mode == evidence.Green
				want := phases(on)
				if l.agentConfig != nil {
					maps.Copy(want, l.agentConfig(on))
				}
				progress("leg %s: %s run: setting %s", l.name, mode, agent.Describe(want))
				run := &evidence.Run{Mode: mode, Started: time.Now()}
				if err := setAgentConfig(ctx, want); err != nil {
					run.Error = err.Error()
				} else {
					time.Sleep(settle)
					l.measure(ctx, w, run)
				}
				run.Duration = time.Since(run.Started)
				progress("leg %s: %s run: %s (%s)", l.name, mode, run.Summary, run.Duration.Round(100*time.Millisecond))
				_ = suite.evidence.AddPhase(fmt.Sprintf("leg %s %s", l.name, mode), run.Duration)
				if mode == evidence.Red {
					rec.Red = run
				} else {
					rec.Green = run
				}
			}
			if l.control {
				rec.Verdict, rec.Reason = judgeControl(rec.Red, rec.Green)
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

// refuseLeg is a refusal leg: prepare finds what to dial, and the measure
// (measure.Refusal) expects the proxy to refuse every attempt with
// reason.
func refuseLeg(name, reason, setup string, prepare func(ctx context.Context) (measure.Target, error)) leg[measure.Target] {
	return leg[measure.Target]{
		name:       name,
		setup:      setup,
		redExpect:  measure.RedExpect,
		greenMeans: measure.GreenMeans(reason),
		prepare: func(ctx context.Context) (measure.Target, error) {
			t, err := prepare(ctx)
			t.Reason = reason
			return t, err
		},
		measure: func(ctx context.Context, t measure.Target, run *evidence.Run) {
			measure.Refusal(ctx, suite.cluster, suite.clients, t, run)
		},
	}
}

// judgeControl: a control leg must meet the green condition in both runs.
func judgeControl(red, green *evidence.Run) (evidence.Verdict, string) {
	switch {
	case red == nil || red.Error != "":
		return evidence.Incomplete, "red run did not observe"
	case !red.MetGreen:
		return evidence.RedUnexpected, "control leg: red must already be unchanged traffic: " + red.Summary
	case green == nil:
		return evidence.Incomplete, "no green run"
	case green.Error != "" || !green.MetGreen:
		return evidence.GreenFailed, green.Summary + green.Error
	}
	return evidence.Pass, "control: unchanged with the agent off and on"
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
