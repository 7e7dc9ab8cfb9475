package evidence

import (
	"fmt"
	"strconv"
)

// Want is what one run requires of a number: at least N, exactly N, or
// nothing (the zero Want).
type Want struct {
	Op string  `json:"op,omitempty"` // OpAtLeast, OpExactly, or "" for nothing
	N  float64 `json:"n,omitempty"`
}

// The operators of a Want.
const (
	OpAtLeast = ">="
	OpExactly = "=="
)

// AtLeast requires at least n.
func AtLeast(n float64) Want { return Want{Op: OpAtLeast, N: n} }

// Exactly requires exactly n.
func Exactly(n float64) Want { return Want{Op: OpExactly, N: n} }

// Holds reports whether got meets w.
func (w Want) Holds(got float64) bool {
	switch w.Op {
	case OpAtLeast:
		return got >= w.N
	case OpExactly:
		return got == w.N
	}
	return true
}

// String is "≥ n", "= n", or "—" for no requirement.
func (w Want) String() string {
	switch w.Op {
	case OpAtLeast:
		return "≥ " + num(w.N)
	case OpExactly:
		return "= " + num(w.N)
	}
	return "—"
}

// Check is one number the suite read around a run (a counter's rise on one
// node, a count of log records) and what red and green require of it. A
// run is judged by both: ApplyChecks folds them into MetRed and MetGreen.
type Check struct {
	// Node is where it was read; "" for the cluster as a whole.
	Node string `json:"node,omitempty"`
	// What is the series: a stat or metric name with labels.
	What string  `json:"what"`
	Got  float64 `json:"got"`
	// Why says where the requirement comes from ("10 attempts from …").
	Why   string `json:"why,omitempty"`
	Green Want   `json:"green"`
	Red   Want   `json:"red"`
}

// Want is what mode requires of c.
func (c Check) Want(mode Mode) Want {
	if mode == Red {
		return c.Red
	}
	return c.Green
}

// Holds reports whether c meets what mode requires.
func (c Check) Holds(mode Mode) bool { return c.Want(mode).Holds(c.Got) }

// String is the check read against mode's requirement: "node: what +got
// (mode wants ≥ n: why)".
func (c Check) String(mode Mode) string {
	s := fmt.Sprintf("%s +%s", c.What, num(c.Got))
	if c.Node != "" {
		s = c.Node + ": " + s
	}
	s += fmt.Sprintf(" (%s wants %s", mode, c.Want(mode))
	if c.Why != "" {
		s += ": " + c.Why
	}
	return s + ")"
}

// Failing is the checks of the run that mode's condition rejects.
func (r *Run) Failing(mode Mode) []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Holds(mode) {
			out = append(out, c)
		}
	}
	return out
}

// ApplyChecks folds the run's checks into its verdict inputs: MetGreen
// stays true only if every check meets green's requirement, MetRed only if
// every one meets red's. The leg's own measure set both first, from what
// its clients saw; the checks add what the proxy and the agent counted.
func (r *Run) ApplyChecks() {
	if len(r.Checks) == 0 {
		return
	}
	r.MetGreen = r.MetGreen && len(r.Failing(Green)) == 0
	r.MetRed = r.MetRed && len(r.Failing(Red)) == 0
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
