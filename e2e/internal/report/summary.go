package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// summaryWidth bounds a verdict's reason in Summary: the table is one screen
// (report.md holds the whole reason).
const summaryWidth = 60

// Summary writes the run's verdict as a one-screen table, the last thing a
// run prints (svclb-e2e run, cmd/report -summary): status and tally, one line
// per leg, the failures outside the legs, each cut to one line.
func (r Report) Summary(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "svclb acceptance legs: %s (%s)\n", r.Status, r.Tally)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if len(r.Legs) > 0 {
		fmt.Fprintln(tw, "LEG\tVERDICT\tDURATION")
	}
	for _, l := range r.Legs {
		name := l.Name
		if !l.Selected {
			name += " (not selected)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, oneLine(l.VerdictText), l.Duration)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Legs) == 0 {
		b.WriteString("no leg ran\n")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "run failure: %s\n", oneLine(f))
	}
	for _, f := range r.SuiteFailures {
		fmt.Fprintf(&b, "suite failure: %s\n", oneLine(f))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine is s on one line of at most summaryWidth characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= summaryWidth {
		return s
	}
	return string([]rune(s)[:summaryWidth-1]) + "…"
}
