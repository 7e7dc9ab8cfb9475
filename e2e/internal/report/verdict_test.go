package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/fixtures/evidence"
)

func TestVerdict(t *testing.T) {
	const (
		ran     = types.SpecStatePassed
		failed  = types.SpecStateFailed
		skipped = types.SpecStateSkipped
	)
	redOK, greenOK := run(evidence.Red, true, false), run(evidence.Green, false, true)
	unchanged := run(evidence.Red, true, true) // a control leg's red run
	reach := leg("reach", redOK, greenOK, "")
	drain := leg("drain", redOK, greenOK, "")
	passthrough := leg("passthrough", unchanged, greenOK, evidence.Pass)
	all3 := map[string]types.SpecState{"reach": ran, "drain": ran, "passthrough": ran}
	cases := []struct {
		name    string
		legs    []*evidence.Leg
		ginkgo  []types.Report
		failure string // the caller's
		set     func(*evidence.Set)
		want    bool
		// wantRow is a leg that must have a row, with its verdict.
		wantRow, wantVerdict string
		unselected           bool // wantRow's evidence is outside the selection
	}{
		{name: "every selected leg passed", legs: []*evidence.Leg{reach, drain, passthrough}, ginkgo: ginkgoRun("", all3), want: true},
		{name: "label filter: the legs it selects passed", legs: []*evidence.Leg{reach},
			ginkgo: ginkgoRun("reach", map[string]types.SpecState{"reach": ran, "drain": skipped, "topology": skipped}), want: true},
		{name: "one leg failed", legs: []*evidence.Leg{reach, leg("drain", redOK, run(evidence.Green, false, false), ""), passthrough},
			ginkgo: ginkgoRun("", all3), wantRow: "drain", wantVerdict: "green failed"},
		{name: "one leg proves nothing", legs: []*evidence.Leg{reach, leg("drain", run(evidence.Red, false, true), greenOK, "")},
			ginkgo: ginkgoRun("reach || drain", map[string]types.SpecState{"reach": ran, "drain": ran}), wantRow: "drain", wantVerdict: "proves nothing"},
		{name: "selected leg skipped, no evidence", legs: []*evidence.Leg{reach, drain},
			ginkgo: ginkgoRun("", map[string]types.SpecState{"reach": ran, "drain": ran, "topology": skipped}), wantRow: "topology", wantVerdict: "incomplete"},
		{name: "selected leg failed before it wrote evidence", legs: []*evidence.Leg{reach},
			ginkgo: ginkgoRun("reach,affinity", map[string]types.SpecState{"reach": ran, "affinity": failed}), wantRow: "affinity", wantVerdict: "incomplete"},
		{name: "control leg: unchanged red and green pass", legs: []*evidence.Leg{passthrough},
			ginkgo: ginkgoRun("passthrough", map[string]types.SpecState{"passthrough": ran}), want: true, wantRow: "passthrough", wantVerdict: "pass"},
		{name: "control leg: green failed", legs: []*evidence.Leg{leg("passthrough", unchanged, run(evidence.Green, false, false), evidence.GreenFailed)},
			ginkgo: ginkgoRun("passthrough", map[string]types.SpecState{"passthrough": failed}), wantRow: "passthrough", wantVerdict: "green failed"},
		{name: "selection not recorded (no ginkgo.json)", legs: []*evidence.Leg{reach, drain, passthrough}},
		{name: "filter selects no leg", ginkgo: ginkgoRun("programming", map[string]types.SpecState{"reach": skipped})},
		{name: "failure outside the suite", legs: []*evidence.Leg{reach}, ginkgo: ginkgoRun("reach", map[string]types.SpecState{"reach": ran}),
			failure: "make cluster failed"},
		{name: "setup failure (failure.txt)", legs: []*evidence.Leg{reach}, ginkgo: ginkgoRun("reach", map[string]types.SpecState{"reach": ran}),
			set: func(s *evidence.Set) { s.Failure = "setup: guard: timeout" }},
		{name: "suite failed outside the legs", legs: []*evidence.Leg{reach},
			ginkgo: func() []types.Report {
				g := ginkgoRun("reach", map[string]types.SpecState{"reach": ran})
				g[0].SpecialSuiteFailureReasons = []string{"Interrupted by User"}
				return g
			}()},
		// Passing evidence does not pass a leg whose spec then failed
		// (restoring the agent's config failed after the leg wrote).
		{name: "evidence passed, spec failed after", legs: []*evidence.Leg{reach},
			ginkgo: ginkgoRun("reach", map[string]types.SpecState{"reach": failed}), wantRow: "reach", wantVerdict: "failed"},
		{name: "failed evidence of a leg outside the selection", legs: []*evidence.Leg{reach, leg("drain", run(evidence.Red, false, true), greenOK, "")},
			ginkgo: ginkgoRun("reach", map[string]types.SpecState{"reach": ran, "drain": skipped}), wantRow: "drain", wantVerdict: "proves nothing", unselected: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := &evidence.Set{Legs: c.legs}
			if c.set != nil {
				c.set(set)
			}
			r := Build(Input{Evidence: set, Ginkgo: c.ginkgo, Failure: c.failure})
			if r.Passed != c.want || (r.Status == "PASSED") != c.want {
				t.Fatalf("Passed = %v (%s, %s), want %v", r.Passed, r.Status, r.Tally, c.want)
			}
			if c.wantRow == "" {
				return
			}
			i := slices.IndexFunc(r.Legs, func(l Leg) bool { return l.Name == c.wantRow })
			if i < 0 || r.Legs[i].Verdict != c.wantVerdict || r.Legs[i].Failed == (c.wantVerdict == "pass") || r.Legs[i].Selected == c.unselected {
				t.Fatalf("row %q: %+v, want verdict %q", c.wantRow, r.Legs, c.wantVerdict)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	states := map[string]types.SpecState{"refuse-no-endpoints": types.SpecStatePassed,
		"reach": types.SpecStateSkipped, "drain": types.SpecStateSkipped, "affinity": types.SpecStatePending}
	cases := []struct {
		filter      string
		suiteLabels []string
		want        []string
	}{
		// A selected spec that was skipped (interrupted run) is still
		// selected: that is how a leg that did not run fails the run. A
		// pending one never runs, whatever the filter.
		{"", nil, []string{"reach", "refuse-no-endpoints", "drain"}},
		{"reach || refuse-no-endpoints", nil, []string{"reach", "refuse-no-endpoints"}},
		{"!drain", nil, []string{"reach", "refuse-no-endpoints"}},
		// Ginkgo matches the suite's labels together with the spec's.
		{"e2e && drain", []string{"e2e"}, []string{"drain"}},
		{"e2e && drain", nil, nil},
	}
	for _, c := range cases {
		g := ginkgoRun(c.filter, states)
		g[0].SuiteLabels = c.suiteLabels
		if sel := selectionOf(Input{Evidence: &evidence.Set{Order: runOrder}, Ginkgo: g}); !sel.Recorded || sel.Filter != c.filter || !slices.Equal(sel.Legs, c.want) {
			t.Errorf("filter %q, suite labels %v: selection %+v, want legs %v", c.filter, c.suiteLabels, sel, c.want)
		}
	}
	if sel := selectionOf(Input{Ginkgo: ginkgoRun("reach &&", states)}); sel.Recorded || len(sel.Legs) > 0 {
		t.Errorf("a filter Ginkgo cannot parse must not count as recorded: %+v", sel)
	}
	if sel := selectionOf(Input{}); sel.Recorded {
		t.Error("no Ginkgo report: the selection is not recorded")
	}
}

// TestNewLegSelected: a leg the run's order does not list is still a leg
// when its spec carries evidence.LegLabel: selected, ordered after the
// listed ones, and failing the run when it fails.
func TestNewLegSelected(t *testing.T) {
	spec := func(name string, st types.SpecState) types.SpecReport {
		s := legSpec(name, st, "")
		s.ContainerHierarchyLabels = [][]string{{evidence.LegLabel, name}}
		return s
	}
	g := []types.Report{{SpecReports: types.SpecReports{spec("zz-new", types.SpecStateFailed), spec("reach", types.SpecStatePassed), spec("aa-new", types.SpecStatePassed)}}}
	sel := selectionOf(Input{Evidence: &evidence.Set{Order: runOrder}, Ginkgo: g})
	if want := []string{"reach", "aa-new", "zz-new"}; !slices.Equal(sel.Legs, want) {
		t.Fatalf("selection %v, want %v", sel.Legs, want)
	}
	r := Build(Input{Evidence: &evidence.Set{Order: runOrder, Legs: []*evidence.Leg{leg("reach", run(evidence.Red, true, false), run(evidence.Green, false, true), "")}}, Ginkgo: g})
	if r.Passed {
		t.Fatal("a selected new leg that failed must fail the run")
	}
	var rows []string
	for _, l := range r.Legs {
		rows = append(rows, l.Name+":"+l.Verdict)
	}
	if want := []string{"reach:pass", "aa-new:incomplete", "zz-new:incomplete"}; !slices.Equal(rows, want) {
		t.Errorf("rows %v, want %v", rows, want)
	}
}

// TestRunEvidenceText: what a row shows of the suite's evidence.
func TestRunEvidenceText(t *testing.T) {
	held := evidence.Cut{Service: "legs/itp", Before: map[string]int{"cp": 0, "w1": 0}, After: map[string]int{"cp": 0, "w1": 0}}
	restored := held
	restored.After = map[string]int{"cp": 0, "w1": 2}
	green := &evidence.Run{Mode: evidence.Green, Cuts: []evidence.Cut{held},
		Flows: []evidence.Flow{
			{Node: "cp", To: "10.96.0.9:80", Attempts: 10, ProxyClosed: 10},
			{Node: "w1", To: "10.96.0.9:80", Attempts: 10, Replies: 10, Backends: map[string]int{"itp-a@w1/zone-a": 10}},
		},
		Checks: []evidence.Check{
			{Node: "cp", What: "svclb_svc_refused_total{reason=\"no-endpoints\"}", Got: 10, Green: evidence.Exactly(10), Red: evidence.Exactly(0)},
			{Node: "w1", What: "tcp.cap_svc.downstream_cx_total", Got: 9, Green: evidence.AtLeast(10), Red: evidence.Exactly(0)},
			{Node: "w1", What: "tcp.cap_svc.downstream_cx_no_route", Got: 0, Green: evidence.Exactly(0)},
			{What: "refusal log records", Got: 3, Green: evidence.AtLeast(1), Red: evidence.Exactly(0)},
		},
		Refusals: []evidence.Refusal{{Node: "cp", Reason: "no-endpoints", Namespace: "legs", Service: "itp", Destination: "10.96.0.9:80", Flag: "UH"}},
	}
	red := &evidence.Run{Mode: evidence.Red, Cuts: []evidence.Cut{restored}}
	zone := func(n string) string { return map[string]string{"cp": "zone-c", "w1": "zone-a"}[n] }

	if got := legCut(red, green); got != "cut during red ✗ / green ✓" {
		t.Errorf("legCut = %q", got)
	}
	if got := legCut(&evidence.Run{}, nil); got != "—" {
		t.Errorf("legCut without cut Services = %q", got)
	}
	if got := cutText(red); !strings.HasPrefix(got, "✗ kube-proxy held legs/itp: 2 kube-proxy ClusterIP entries of it on w1 after the run") {
		t.Errorf("cutText(red) = %q", got)
	}
	if got := cutText(green); got != "✓ legs/itp: no kube-proxy ClusterIP entry on any of 2 nodes before or after the run" {
		t.Errorf("cutText(green) = %q", got)
	}
	synced := &evidence.Run{Cuts: []evidence.Cut{held}}
	synced.Cuts[0].Redeletions, synced.Cuts[0].SlowestRedeletion = map[string]int{"w1": 1}, map[string]float64{"w1": 0.002}
	if got := cutText(synced); got != "✓ legs/itp: no kube-proxy ClusterIP entry on any of 2 nodes before or after the run; "+
		"kube-proxy's syncs restored legs/itp 1× on w1 (re-cut within 2ms) and the guard cut it again" {
		t.Errorf("cutText(synced) = %q", got)
	}
	// Per client node: the breakdown topology and itp-local are about.
	if got, want := clientLines(green, zone), []string{
		"client on cp (zone-c): 0/10 replies, 10 proxy-closed",
		"client on w1 (zone-a): 10/10 replies; from itp-a@w1/zone-a=10",
	}; !slices.Equal(got, want) {
		t.Errorf("clientLines = %q, want %q", got, want)
	}
	lines, ok, all := checkLines(green)
	if ok != 3 || all != 4 || len(lines) != 3 {
		t.Fatalf("checkLines: %d of %d hold, lines %q", ok, all, lines)
	}
	if want := "w1: tcp.cap_svc.downstream_cx_total +9 (≥ 10 ✗), tcp.cap_svc.downstream_cx_no_route +0 (= 0 ✓)"; lines[1] != want {
		t.Errorf("checkLines[1] = %q, want %q", lines[1], want)
	}
	if want := "cluster: refusal log records +3 (≥ 1 ✓)"; lines[2] != want {
		t.Errorf("checkLines[2] = %q, want %q", lines[2], want)
	}
	if got := refusalLines(green); len(got) != 1 || got[0] != "refusal record on cp: reason=no-endpoints service=legs/itp destination=10.96.0.9:80 source=— flag=UH cluster=—" {
		t.Errorf("refusalLines = %q", got)
	}
}

func TestMarks(t *testing.T) {
	cases := []struct {
		run  *evidence.Run
		v    evidence.Verdict
		want string
		ok   bool
	}{
		{run(evidence.Red, true, false), evidence.Pass, "✓ red", true},
		{run(evidence.Red, true, true), evidence.Pass, "✓ unchanged (control leg)", true},
		{run(evidence.Red, true, true), evidence.GreenFailed, "✓ unchanged (control leg)", true},
		// Not a control leg: Judge says a green-looking red proves nothing.
		{run(evidence.Red, true, true), evidence.ProvesNothing, "✗ green", false},
		{run(evidence.Red, false, true), evidence.ProvesNothing, "✗ green", false},
		{run(evidence.Red, false, false), evidence.RedUnexpected, "✗", false},
		{run(evidence.Green, false, true), evidence.Pass, "✓ green", true},
		{run(evidence.Green, false, false), evidence.GreenFailed, "✗", false},
	}
	for _, c := range cases {
		if got, ok := mark(c.run, c.v); got != c.want || ok != c.ok {
			t.Errorf("mark(%s red=%v green=%v, %s) = %q %v, want %q %v", c.run.Mode, c.run.MetRed, c.run.MetGreen, c.v, got, ok, c.want, c.ok)
		}
	}
}

// TestFigureOnlySelection: LEGS=cni-latency selects a figure and no leg. The run passes when
// the figure ran and passed, and fails when it was skipped (interrupted) or failed; its
// table is in the report.
func TestFigureOnlySelection(t *testing.T) {
	figure := func(st types.SpecState) []types.Report {
		g := ginkgoRun("cni-latency", map[string]types.SpecState{"reach": types.SpecStateSkipped, "enroll": types.SpecStateSkipped})
		g[0].SpecReports = append(g[0].SpecReports,
			types.SpecReport{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"svclb-cni ADD latency"},
				ContainerHierarchyLabels: [][]string{{"cni-latency", "opt-in"}}, LeafNodeText: "times the sandboxes", State: st},
			types.SpecReport{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"network programming latency"},
				ContainerHierarchyLabels: [][]string{{"programming"}}, LeafNodeText: "compares", State: types.SpecStateSkipped})
		return g
	}
	set := &evidence.Set{CNILatency: &evidence.CNILatency{PodsPerKind: 50,
		Enrolled: evidence.Spread{Count: 50, P50: 740, P99: 1200}, NotEnrolled: evidence.Spread{Count: 50, P50: 590, P99: 900}, AddedP50: 150}}
	r := Build(Input{Evidence: set, Ginkgo: figure(types.SpecStatePassed)})
	if !r.Passed || !slices.Equal(r.Selection.Figures, []string{"cni-latency"}) || len(r.Selection.Legs) != 0 {
		t.Fatalf("figure passed: Passed=%v selection %+v (%s) %v", r.Passed, r.Selection, r.Tally, r.SuiteFailures)
	}
	if r.CNILatency == nil || len(r.CNILatency.Rows) != 2 || r.CNILatency.Rows[0].P50 != "740 ms" ||
		!strings.Contains(r.CNILatency.Title, "1.25× not enrolled") {
		t.Errorf("cni-latency table %+v", r.CNILatency)
	}
	for _, st := range []types.SpecState{types.SpecStateSkipped, types.SpecStateFailed, types.SpecStateInterrupted} {
		if r := Build(Input{Evidence: set, Ginkgo: figure(st)}); r.Passed {
			t.Errorf("figure %s: the run passed", st)
		}
	}
}

// TestSkippedLeg: a leg skipped for what the cluster lacks (leg.Needs) is
// shown as skipped with its reason, is not counted as passed, and does not
// fail the run.
func TestSkippedLeg(t *testing.T) {
	g := ginkgoRun("", map[string]types.SpecState{"reach": types.SpecStatePassed, "topology": types.SpecStateSkipped})
	why := "needs ≥3 zones of schedulable nodes; the cluster has 1 schedulable workers [w1], its schedulable nodes 1 zones [a]"
	r := Build(Input{Evidence: &evidence.Set{Order: runOrder, Legs: []*evidence.Leg{
		leg("reach", run(evidence.Red, true, false), run(evidence.Green, false, true), ""),
		{Name: "topology", Verdict: evidence.Skipped, Reason: why},
	}}, Ginkgo: g})
	if !r.Passed {
		t.Error("a leg skipped for what the cluster lacks failed the run")
	}
	if want := "1 of 2 selected legs passed, 1 skipped (the cluster lacks what they need)"; r.Tally != want {
		t.Errorf("tally %q, want %q", r.Tally, want)
	}
	for _, l := range r.Legs {
		if l.Name == "topology" && (l.Failed || l.VerdictText != "skipped: "+why || l.Red.Ran || l.Green.Ran) {
			t.Errorf("skipped row: failed %v, text %q, red ran %v, green ran %v", l.Failed, l.VerdictText, l.Red.Ran, l.Green.Ran)
		}
	}
}
