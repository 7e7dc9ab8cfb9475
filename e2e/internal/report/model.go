package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/fixtures/evidence"
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
	PhaseChart    *render.Chart
	// Programming and CNILatency are the figures, when they ran.
	Programming *Figure
	CNILatency  *Figure
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
	// Cut is kube-proxy's cut of the leg's Services through both runs:
	// "red ✓ / green ✓", a ✗ where kube-proxy restored one, "—" when the
	// leg dials no cut Service.
	Cut string
	// Chance is what in the leg can fail by chance (per-attempt timeout,
	// false-failure odds), as the leg states it.
	Chance string
	// Dialled are the targets the suite gathered evidence for.
	Dialled string
	// Evidence is both runs' evidence on one line (report.md's cell).
	Evidence string
}

// Side is one run of a leg.
type Side struct {
	Mode  string // "red" or "green"
	Title string // "red (agent off)"
	// Means is what this run is expected to show (the leg's redExpect or greenMeans).
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
	Evidence []string
	// Cut is kube-proxy's hold on the leg's cut Services: "✓ cut …", "✗ …",
	// "" when it dials none.
	Cut string
	// Clients are the attempts per client node (and destination), with the
	// backends that answered: where a reply came from is what topology and
	// itp-local are about.
	Clients []string
	// Checks are the counters read per node around the run against what
	// this run's mode requires, a node a line; ChecksOK of ChecksAll hold.
	Checks              []string
	ChecksOK, ChecksAll int
	// Refusals are the agent's records of refused connections, one per
	// target the leg expects refused.
	Refusals                     []string
	Outcomes, Backends, Timeline *render.Chart
}

// Phase is one line of phases.tsv.
type Phase struct {
	Name    string
	Seconds string
}

// Figure is a latency table: the programming figure (agent against
// kube-proxy) or the svclb-cni one (enrolled pods against not).
type Figure struct {
	Title string
	Rows  []FigureRow
	Note  string
}

// FigureRow is one component's quantiles, ready to print.
type FigureRow struct {
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
	r.Legs = legsOf(in, r.Selection, zoneOf(in.Evidence))
	r.SuiteFailures = append(r.SuiteFailures, figuresNotRun(r.Selection)...)
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
		r.CNILatency = cniLatencyOf(in.Evidence.CNILatency)
	}
	return r
}

func tally(sel Selection, legs []Leg) string {
	if !sel.Recorded {
		return "no usable ginkgo.json, so the run cannot pass: nothing says which legs had to run"
	}
	ok, skipped := 0, 0
	for _, l := range legs {
		switch {
		case !slices.Contains(sel.Legs, l.Name) || l.Failed:
		case l.Verdict == string(evidence.Skipped):
			skipped++
		default:
			ok++
		}
	}
	t := fmt.Sprintf("%d of %d selected legs passed", ok, len(sel.Legs))
	if skipped > 0 {
		t += fmt.Sprintf(", %d skipped (the cluster lacks what they need)", skipped)
	}
	if len(sel.Figures) > 0 {
		t += "; figures selected: " + strings.Join(sel.Figures, ", ")
	}
	return t
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
func legsOf(in Input, sel Selection, zone func(string) string) []Leg {
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
	slices.SortStableFunc(names, in.byRun())
	out := make([]Leg, 0, len(names))
	for _, n := range names {
		if l, ok := ev[n]; ok {
			row := legRow(l, zone)
			row.Selected = slices.Contains(sel.Legs, n)
			// Evidence that passed does not pass a leg whose spec then
			// failed (restoring the agent's config, a timeout after it
			// wrote): every selected leg must have run and passed.
			if s, ok := specs[n]; ok && !row.Failed && s.State.Is(types.SpecStateFailureStates) {
				row.Failed, row.Verdict = true, "failed"
				row.Reason = "its evidence passed, but its spec " + missingReason(s)
				row.VerdictText = row.Verdict + ": " + row.Reason
			}
			out = append(out, row)
			continue
		}
		s, ok := specs[n]
		reason := "selected, but Ginkgo reports no spec for it"
		if ok {
			reason = missingReason(s)
		}
		out = append(out, Leg{Name: n, Verdict: string(evidence.Incomplete), Failed: true, Reason: reason, Selected: slices.Contains(sel.Legs, n),
			VerdictText: string(evidence.Incomplete) + ": " + reason, Duration: fmtDur(s.RunTime), Cut: "—",
			Red: Side{Mode: string(evidence.Red), Text: "—"}, Green: Side{Mode: string(evidence.Green), Text: "—"}})
	}
	return out
}

func legRow(l *evidence.Leg, zone func(string) string) Leg {
	out := Leg{Name: l.Name, Verdict: string(l.Verdict), Failed: l.Verdict.Failed(), Reason: l.Reason,
		VerdictText: string(l.Verdict), Setup: l.Setup, HasEvidence: true, File: "legs/" + l.Name + ".json",
		Duration: fmtDur(l.Duration), Chance: l.Chance, Dialled: strings.Join(l.Dialled, "; "), Cut: legCut(l.Red, l.Green)}
	// A skipped leg says why: what it needs and what the cluster has.
	if (out.Failed || l.Verdict == evidence.Skipped) && l.Reason != "" {
		out.VerdictText += ": " + l.Reason
	}
	sc := scalesOf(l)
	out.Red = sideOf(evidence.Red, l.Red, l.RedExpect, l.Verdict, sc, zone)
	out.Green = sideOf(evidence.Green, l.Green, l.GreenMeans, l.Verdict, sc, zone)
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

func sideOf(mode evidence.Mode, r *evidence.Run, means string, v evidence.Verdict, sc scales, zone func(string) string) Side {
	s := Side{Mode: string(mode), Title: fmt.Sprintf("%s (agent %s)", mode, agent[mode]), Means: means, Text: "not run"}
	if r == nil {
		return s
	}
	s.Ran, s.Summary, s.Error, s.Attempts = true, r.Summary, r.Error, r.Attempts
	s.Duration = r.Duration.Round(100 * time.Millisecond).String()
	s.Cut = cutText(r)
	s.Clients = clientLines(r, zone)
	s.Checks, s.ChecksOK, s.ChecksAll = checkLines(r)
	s.Refusals = refusalLines(r)
	s.Evidence = evidenceParts(r, s)
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

// zoneOf names a node's zone from the evidence's environment.
func zoneOf(s *evidence.Set) func(string) string {
	zones := map[string]string{}
	if s != nil && s.Env != nil {
		for _, n := range s.Env.Nodes {
			zones[n.Name] = n.Zone
		}
	}
	return func(node string) string { return zones[node] }
}

func programmingOf(p *evidence.Programming) *Figure {
	if p == nil {
		return nil
	}
	out := &Figure{Title: fmt.Sprintf("Network programming latency (%d EndpointSlice changes, same run)", p.Changes), Note: p.Note}
	for _, c := range []struct {
		name string
		q    evidence.Quantiles
	}{{"svclb agent", p.Agent}, {"kube-proxy", p.KubeProxy}} {
		out.Rows = append(out.Rows, FigureRow{Component: c.name, Metric: c.q.Metric, Samples: fmt.Sprintf("%.0f", c.q.Count),
			P50: secs(c.q.P50, c.q.Count), P99: secs(c.q.P99, c.q.Count)})
	}
	return out
}

func cniLatencyOf(c *evidence.CNILatency) *Figure {
	if c == nil {
		return nil
	}
	out := &Figure{Title: fmt.Sprintf("svclb-cni: pod sandbox time, enrolled against not (%d pods of each)", c.PodsPerKind), Note: c.Note}
	if c.NotEnrolled.P50 > 0 {
		out.Title += fmt.Sprintf("; p50 %+.0f ms, %.2f× not enrolled", c.AddedP50, c.Enrolled.P50/c.NotEnrolled.P50)
	}
	if c.Chance != "" {
		out.Note += " Chance: " + c.Chance
	}
	for _, k := range []struct {
		name string
		s    evidence.Spread
	}{{"enrolled (svclb-cni captures)", c.Enrolled}, {"not enrolled (svclb-cni passes through)", c.NotEnrolled}} {
		out.Rows = append(out.Rows, FigureRow{Component: k.name, Metric: "containerd RunPodSandbox", Samples: fmt.Sprint(k.s.Count),
			P50: ms(k.s.P50, k.s.Count), P99: ms(k.s.P99, k.s.Count)})
	}
	return out
}
