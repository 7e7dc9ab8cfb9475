package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

// Report is everything report.md and report.html show, computed once from
// an Input: the two templates only lay it out, so they cannot disagree.
type Report struct {
	// Passed is the run's verdict (see passed); cmd/report exits on it.
	Passed bool
	Status string // "PASSED" or "FAILED"
	// Tally counts the selected legs that passed, or says why it cannot.
	Tally     string
	Env       Env
	Selection Selection
	// Failures are outside the suite: the caller's note, failure.txt.
	Failures []string
	// SuiteFailures are failed suite nodes and specs that are not legs.
	SuiteFailures []string
	Legs          []Leg
	Phases        []Phase
	PhaseChart    *Chart
	Programming   *Programming
}

// Env is what the legs ran against, each value ready to print ("—" when unknown).
type Env struct {
	Proxy, ProxyChoice, Kubernetes, Kind, Envoy, KubeProxyMode, Nodes string
}

// Leg is one leg: its verdict and its red and green runs side by side.
type Leg struct {
	Name    string
	Verdict string
	Failed  bool
	Reason  string
	// Selected is false for a leg that wrote evidence but was not selected.
	Selected bool
	// VerdictText is the verdict, with its reason when it failed.
	VerdictText string
	Setup       string
	// HasEvidence is false for a leg only Ginkgo knows: it failed or was
	// skipped before it wrote legs/<name>.json.
	HasEvidence bool
	// File is the leg's evidence file, relative to the report.
	File       string
	Duration   string
	Red, Green Side
	// Evidence is both runs' evidence on one line (report.md's cell).
	Evidence string
}

// Side is one run of a leg.
type Side struct {
	Mode  string // "red" or "green"
	Title string // "red (agent off)"
	// Means is what this run is expected to show (e2e/doc.go).
	Means string
	Ran   bool
	OK    bool   // the run showed what its mode is for
	Mark  string // "✓ red", "✗ green", …
	// Text is report.md's cell: mark, duration and summary, or why not.
	Text     string
	Summary  string
	Error    string
	Duration string
	Attempts int
	// Evidence is what the run recorded beyond its summary, an item a line.
	Evidence                     []string
	Outcomes, Backends, Timeline *Chart
}

// Phase is one line of phases.tsv.
type Phase struct {
	Name    string
	Seconds string
}

// Programming is the network-programming latency table.
type Programming struct {
	Title string
	Rows  []ProgrammingRow
	Note  string
}

// ProgrammingRow is one component's quantiles, ready to print.
type ProgrammingRow struct {
	Component, Metric, Samples, P50, P99 string
}

// Build computes the report.
func Build(in Input) Report {
	r := Report{
		Env:           envOf(in.Evidence),
		Selection:     selectionOf(in),
		Failures:      in.failures(),
		SuiteFailures: in.suiteFailures(),
	}
	r.Legs = legsOf(in, r.Selection)
	r.Passed = passed(r.Selection, r.Legs, r.Failures, r.SuiteFailures)
	r.Status = "FAILED"
	if r.Passed {
		r.Status = "PASSED"
	}
	r.Tally = tally(r.Selection, r.Legs)
	if in.Evidence != nil {
		for _, p := range in.Evidence.Phases {
			r.Phases = append(r.Phases, Phase{Name: p.Name, Seconds: fmt.Sprintf("%.1f", p.Seconds)})
		}
		r.PhaseChart = phaseChart(in.Evidence.Phases)
		r.Programming = programmingOf(in.Evidence.Programming)
	}
	return r
}

func tally(sel Selection, legs []Leg) string {
	if !sel.Recorded {
		return "no usable ginkgo.json, so the run cannot pass: nothing says which legs had to run"
	}
	ok := 0
	for _, l := range legs {
		if slices.Contains(sel.Legs, l.Name) && !l.Failed {
			ok++
		}
	}
	return fmt.Sprintf("%d of %d selected legs passed", ok, len(sel.Legs))
}

func envOf(s *evidence.Set) Env {
	if s == nil || s.Env == nil {
		return Env{Proxy: "—", Kubernetes: "—", Kind: "—", Envoy: "—", KubeProxyMode: "—", Nodes: "—"}
	}
	e := s.Env
	var nodes []string
	for _, n := range e.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s (%s)", n.Name, orDash(n.Zone)))
	}
	return Env{Proxy: orDash(e.Proxy), ProxyChoice: e.ProxyChoice, Kubernetes: orDash(e.KubernetesVersion),
		Kind: orDash(e.KindVersion), Envoy: orDash(e.EnvoyVersion), KubeProxyMode: orDash(e.KubeProxyMode),
		Nodes: orDash(strings.Join(nodes, ", "))}
}

// legsOf gives a row to every leg with evidence, every selected leg and
// every leg spec that ran: a leg that failed before it wrote evidence, or
// never ran, must still show (and fail).
func legsOf(in Input, sel Selection) []Leg {
	ev := map[string]*evidence.Leg{}
	if in.Evidence != nil {
		for _, l := range in.Evidence.Legs {
			ev[l.Name] = l
		}
	}
	specs := in.legSpecs()
	names := sortedKeys(ev)
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range sel.Legs {
		add(n)
	}
	for _, n := range sortedKeys(specs) {
		if !skipped(specs[n]) {
			add(n)
		}
	}
	slices.SortStableFunc(names, func(a, b string) int {
		if d := legRank(a) - legRank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	out := make([]Leg, 0, len(names))
	for _, n := range names {
		if l, ok := ev[n]; ok {
			row := legRow(l)
			row.Selected = slices.Contains(sel.Legs, n)
			out = append(out, row)
			continue
		}
		s, ok := specs[n]
		reason := "selected, but Ginkgo reports no spec for it"
		if ok {
			reason = missingReason(s)
		}
		out = append(out, Leg{Name: n, Verdict: string(evidence.Incomplete), Failed: true, Reason: reason, Selected: slices.Contains(sel.Legs, n),
			VerdictText: string(evidence.Incomplete) + ": " + reason, Duration: fmtDur(s.RunTime),
			Red: Side{Mode: string(evidence.Red), Text: "—"}, Green: Side{Mode: string(evidence.Green), Text: "—"}})
	}
	return out
}

func legRow(l *evidence.Leg) Leg {
	out := Leg{Name: l.Name, Verdict: string(l.Verdict), Failed: l.Verdict.Failed(), Reason: l.Reason,
		VerdictText: string(l.Verdict), Setup: l.Setup, HasEvidence: true, File: "legs/" + l.Name + ".json",
		Duration: fmtDur(l.Duration)}
	if out.Failed && l.Reason != "" {
		out.VerdictText += ": " + l.Reason
	}
	sc := scalesOf(l)
	out.Red = sideOf(evidence.Red, l.Red, l.RedExpect, l.Verdict, sc)
	out.Green = sideOf(evidence.Green, l.Green, l.GreenMeans, l.Verdict, sc)
	out.Evidence = evidenceLine(out.Red, out.Green)
	return out
}

// scales are what a leg's red and green charts share so they compare at a
// glance: the backend rows and bar scale, the timeline rows and end.
type scales struct {
	backends []string
	replies  float64
	rows     []string
	end      time.Duration
}

func scalesOf(l *evidence.Leg) scales {
	set := map[string]bool{}
	sc := scales{rows: timelineRows(l.Red, l.Green), end: timelineEnd(l.Red, l.Green)}
	for _, r := range []*evidence.Run{l.Red, l.Green} {
		if r == nil {
			continue
		}
		for k, n := range r.Backends {
			set[k] = true
			sc.replies = max(sc.replies, float64(n))
		}
	}
	sc.backends = sortedKeys(set)
	return sc
}

var agent = map[evidence.Mode]string{evidence.Red: "off", evidence.Green: "on"}

func sideOf(mode evidence.Mode, r *evidence.Run, means string, v evidence.Verdict, sc scales) Side {
	s := Side{Mode: string(mode), Title: fmt.Sprintf("%s (agent %s)", mode, agent[mode]), Means: means, Text: "not run"}
	if r == nil {
		return s
	}
	s.Ran, s.Summary, s.Error, s.Attempts = true, r.Summary, r.Error, r.Attempts
	s.Duration = r.Duration.Round(100 * time.Millisecond).String()
	s.Evidence = evidenceParts(r)
	if r.Error != "" {
		s.Mark, s.Text = "✗ error", "error: "+r.Error
	} else {
		s.Mark, s.OK = mark(r, v)
		s.Text = fmt.Sprintf("%s (%s): %s", s.Mark, s.Duration, r.Summary)
	}
	s.Outcomes = outcomeChart(r)
	s.Backends = backendChart(r, sc.backends, sc.replies)
	s.Timeline = timelineChart(r, sc.rows, sc.end)
	return s
}

func programmingOf(p *evidence.Programming) *Programming {
	if p == nil {
		return nil
	}
	out := &Programming{Title: fmt.Sprintf("Network programming latency (%d EndpointSlice changes, same run)", p.Changes), Note: p.Note}
	for _, c := range []struct {
		name string
		q    evidence.Quantiles
	}{{"svclb agent", p.Agent}, {"kube-proxy", p.KubeProxy}} {
		out.Rows = append(out.Rows, ProgrammingRow{Component: c.name, Metric: c.q.Metric, Samples: fmt.Sprintf("%.0f", c.q.Count),
			P50: secs(c.q.P50, c.q.Count), P99: secs(c.q.P99, c.q.Count)})
	}
	return out
}
