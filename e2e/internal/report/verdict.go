package report

import (
	"fmt"
	"slices"

	"github.com/onsi/ginkgo/v2/types"
)

// Selection is which legs the run set out to run. Ginkgo records its label
// filter and every spec, filtered ones included (as skipped), in its JSON
// report; applying the filter to the leg specs gives the selection, whatever
// happened to the specs afterwards.
type Selection struct {
	// Recorded is false without a Ginkgo report (or with a filter Ginkgo
	// itself would have refused): then nobody can tell which legs should
	// have run, and the run cannot pass.
	Recorded bool
	// Filter is Ginkgo's label filter; empty selects every leg.
	Filter string
	// Legs are the selected legs in the run's order (Input.byRun).
	Legs []string
	// Figures are the selected specs that are not legs (the programming
	// figure, the opt-in cni-latency one), by their first label.
	Figures []string
	// figureSpecs are their specs, for the verdict.
	figureSpecs []types.SpecReport
}

func selectionOf(in Input) Selection {
	if len(in.Ginkgo) == 0 {
		return Selection{}
	}
	sel := Selection{Recorded: true, Filter: in.Ginkgo[0].SuiteConfig.LabelFilter}
	match := func([]string) bool { return true }
	if sel.Filter != "" {
		f, err := types.ParseLabelFilter(sel.Filter)
		if err != nil {
			return Selection{Filter: sel.Filter}
		}
		match = f
	}
	for _, r := range in.Ginkgo {
		for _, s := range r.SpecReports {
			name := legOf(s)
			if s.State == types.SpecStatePending || slices.Contains(sel.Legs, name) {
				continue
			}
			// Ginkgo matches the suite's labels together with the spec's.
			if !match(append(slices.Clone(r.SuiteLabels), s.Labels()...)) {
				continue
			}
			if name != "" {
				sel.Legs = append(sel.Legs, name)
			} else if s.LeafNodeType == types.NodeTypeIt && len(s.Labels()) > 0 {
				sel.Figures = append(sel.Figures, s.Labels()[0])
				sel.figureSpecs = append(sel.figureSpecs, s)
			}
		}
	}
	slices.SortStableFunc(sel.Legs, in.byRun())
	return sel
}

// figuresNotRun says which selected figures did not run to the end (a
// failed one is a suite failure already).
func figuresNotRun(sel Selection) []string {
	var out []string
	for _, s := range sel.figureSpecs {
		if s.State != types.SpecStatePassed && !s.State.Is(types.SpecStateFailureStates) {
			out = append(out, fmt.Sprintf("%s: selected but %s", s.FullText(), missingReason(s)))
		}
	}
	return out
}

// passed is the run's verdict: the selection is known and not empty (an
// unrecorded one has no legs; a figure alone, LEGS=cni-latency, is a
// selection), every leg shown (each selected leg has one,
// evidence or not) passed, and nothing failed outside the legs.
func passed(sel Selection, legs []Leg, failures, suiteFailures []string) bool {
	if len(sel.Legs)+len(sel.Figures) == 0 || len(failures) > 0 || len(suiteFailures) > 0 {
		return false
	}
	for _, l := range legs {
		if l.Failed {
			return false
		}
	}
	return true
}
