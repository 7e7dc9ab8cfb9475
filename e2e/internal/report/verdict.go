package report

import (
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
	// Legs are the selected legs in e2e/doc.go order.
	Legs []string
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
			if name == "" || slices.Contains(sel.Legs, name) || s.State == types.SpecStatePending {
				continue
			}
			// Ginkgo matches the suite's labels together with the spec's.
			if match(append(slices.Clone(r.SuiteLabels), s.Labels()...)) {
				sel.Legs = append(sel.Legs, name)
			}
		}
	}
	slices.SortStableFunc(sel.Legs, byRank)
	return sel
}

// passed is the run's verdict: the selection is known and not empty (an
// unrecorded one has no legs), every leg shown (each selected leg has one,
// evidence or not) passed, and nothing failed outside the legs.
func passed(sel Selection, legs []Leg, failures, suiteFailures []string) bool {
	if len(sel.Legs) == 0 || len(failures) > 0 || len(suiteFailures) > 0 {
		return false
	}
	for _, l := range legs {
		if l.Failed {
			return false
		}
	}
	return true
}
