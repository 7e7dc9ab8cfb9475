package specs

import "strings"

// Verdicts of a spec.
const (
	Pass              = "PASS"
	ExpectedDeviation = "EXPECTED DEVIATION"
	SkippedVerdict    = "SKIPPED"
	Fail              = "FAIL"
	NotRun            = "NOT RUN"
	// BaselineFail: green failed and so did plain kube-proxy on the same
	// cluster, so the spec says nothing about the agent.
	BaselineFail = "FAILS ON KUBE-PROXY TOO"
)

// Verdicts in report order.
var Verdicts = []string{Pass, ExpectedDeviation, SkippedVerdict, BaselineFail, Fail, NotRun}

// Deviation is a difference from kube-proxy that Proposal 044 itself
// declares. Anchor is its section in docs/peer.md, where the reason is
// written once.
type Deviation struct {
	Anchor string `json:"anchor"`
	Title  string `json:"title"`
}

// The declared deviations (docs/peer.md, "Expected deviations").
var (
	AffinityTimeout = Deviation{Anchor: "sessionaffinityconfigtimeoutseconds-has-no-envoy-counterpart", Title: "sessionAffinityConfig.timeoutSeconds has no Envoy counterpart"}
)

// Causes maps a set entry to the known cause of its failure (docs/peer.md,
// "Open failures"): it is named in the row; the verdict stays FAIL. None is
// known: "should preserve source pod IP for traffic thru service cluster IP",
// the last one, passes since the svc: clusters dial from the pod's netns.
var Causes = map[string]Deviation{}

// Deviations maps a set entry (e2e/conformance/focus.txt) to the deviation it
// may show. Only the entry named here may fail green as EXPECTED DEVIATION;
// any other failure is FAIL. The two "should be rejected" specs are not here:
// the runner sets the agent's `refusal: reset`, so their SYN is refused as
// kube-proxy refuses it, and a failure of theirs is ours.
var Deviations = map[string]Deviation{
	"Services should have session affinity timeout work for service with type clusterIP [LinuxOnly]": AffinityTimeout,
}

// Row is one spec of the set: its runs and its verdict.
type Row struct {
	// Spec is the set entry (e2e/conformance/focus.txt).
	Spec string `json:"spec"`
	// Runs by phase name (red, green, kube-proxy).
	Runs    map[string]Result `json:"runs"`
	Verdict string            `json:"verdict"`
	// Deviation is set for EXPECTED DEVIATION.
	Deviation *Deviation `json:"deviation,omitempty"`
	// Cause is the known cause of a FAIL (Causes).
	Cause *Deviation `json:"cause,omitempty"`
	// Note says what else the runs show (red passed: not served by the
	// agent; a skip's reason).
	Note string `json:"note,omitempty"`
}

// Judge gives a spec its verdict from its runs: the green run decides, the
// red one adds a note when it did not fail (the agent was not what made the
// spec pass). Without a green run the kube-proxy baseline decides.
func Judge(spec string, runs map[string]Result) Row {
	row := Row{Spec: spec, Runs: runs}
	if why, ok := NotRunnable(spec); ok {
		row.Verdict, row.Note = SkippedVerdict, "not run on kind: "+why
		return row
	}
	var notes []string
	decide, ok := runs[PhaseGreen]
	if !ok {
		if decide, ok = runs[PhaseKubeProxy]; ok {
			notes = append(notes, "no green run: the kube-proxy baseline's verdict")
		}
	}
	switch {
	case !ok || decide.State == Absent || decide.State == NotReached:
		row.Verdict = NotRun
	case decide.State == Passed:
		row.Verdict = Pass
	case decide.State == Skipped:
		row.Verdict = SkippedVerdict
		if decide.Message != "" {
			notes = append(notes, "skip: "+decide.Message)
		}
	default:
		base, hasBase := runs[PhaseKubeProxy]
		if d, ok := lookup(Deviations, spec); ok && decide.Name != "" {
			row.Verdict, row.Deviation = ExpectedDeviation, &d
		} else if hasBase && base.State == Failed {
			row.Verdict = BaselineFail
		} else {
			row.Verdict = Fail
			if c, ok := lookup(Causes, spec); ok {
				row.Cause = &c
			}
		}
	}
	if red, ok := runs[PhaseRed]; ok && red.State == Passed {
		notes = append(notes, "red passed: not served through the agent ("+RedPassReason(spec)+")")
	}
	row.Note = strings.Join(notes, "; ")
	return row
}
