package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/fixtures/evidence"
)

// Input is what a report is made of.
type Input struct {
	Evidence *evidence.Set
	// Ginkgo is the suite's JSON report; nil when the suite never ran (for
	// example the cluster could not be created).
	Ginkgo []types.Report
	// Failure is a note from the caller, e.g. the exit status of a make step.
	Failure string
}

// failures are the failures outside the suite: the caller's and the
// evidence's (setup).
func (in Input) failures() []string {
	var out []string
	if in.Failure != "" {
		out = append(out, in.Failure)
	}
	if in.Evidence != nil && in.Evidence.Failure != "" {
		out = append(out, in.Evidence.Failure)
	}
	return out
}

func (in Input) specs() []types.SpecReport {
	var out []types.SpecReport
	for _, r := range in.Ginkgo {
		out = append(out, r.SpecReports...)
	}
	return out
}

// suiteFailures are failed nodes that are not legs (BeforeSuite, AfterSuite,
// reporters, specs without a leg label such as the programming figure) and
// the reasons Ginkgo failed the suite as a whole (interrupt, suite timeout).
func (in Input) suiteFailures() []string {
	var out []string
	for _, s := range in.specs() {
		if !s.State.Is(types.SpecStateFailureStates) || (s.LeafNodeType == types.NodeTypeIt && legOf(s) != "") {
			continue
		}
		what := s.LeafNodeType.String()
		if s.LeafNodeType == types.NodeTypeIt {
			what = s.FullText()
		}
		out = append(out, fmt.Sprintf("%s: %s", what, firstLine(s.Failure.Message)))
	}
	for _, r := range in.Ginkgo {
		for _, reason := range r.SpecialSuiteFailureReasons {
			out = append(out, "Ginkgo: "+firstLine(reason))
		}
	}
	return out
}

// legSpecs maps each leg to its spec in the Ginkgo report (fixtures/leg gives
// a leg one It).
func (in Input) legSpecs() map[string]types.SpecReport {
	out := map[string]types.SpecReport{}
	for _, s := range in.specs() {
		name := legOf(s)
		if name == "" || s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		if _, ok := out[name]; !ok {
			out[name] = s
		}
	}
	return out
}

func skipped(s types.SpecReport) bool {
	return s.State.Is(types.SpecStateSkipped | types.SpecStatePending)
}

// legOf returns the leg a spec belongs to: with evidence.LegLabel among its
// labels, its other label (the leg's name); else, for reports of suites
// older than that label, the label its container is named for ("leg
// <name>", as the suite names every leg's container).
func legOf(s types.SpecReport) string {
	labels := s.Labels()
	if slices.Contains(labels, evidence.LegLabel) {
		for _, l := range labels {
			if l != evidence.LegLabel {
				return l
			}
		}
	}
	for _, l := range labels {
		if slices.Contains(s.ContainerHierarchyTexts, "leg "+l) {
			return l
		}
	}
	return ""
}

// byRun orders legs as the run ran them (the order its evidence records),
// legs it does not list after them by name; evidence older than that
// record is in name order.
func (in Input) byRun() func(a, b string) int {
	var order []string
	if in.Evidence != nil {
		order = in.Evidence.Order
	}
	return evidence.ByOrder(order)
}

// missingReason says why a leg that Ginkgo knows wrote no evidence.
func missingReason(s types.SpecReport) string {
	switch {
	case s.State == types.SpecStateSkipped && strings.TrimSpace(s.Failure.Message) == "":
		return "did not run (skipped)"
	case s.State == types.SpecStatePassed:
		return "passed but wrote no evidence"
	}
	reason := s.State.String()
	if s.Failure.Message != "" {
		reason += ": " + firstLine(s.Failure.Message)
	}
	return reason
}
