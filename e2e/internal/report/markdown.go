package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Markdown writes report.md.
func Markdown(w io.Writer, in Input) error {
	b := bufio.NewWriter(w)
	rows := in.rows()
	status := "FAILED"
	if in.Passed() {
		status = "PASSED"
	}
	fmt.Fprintf(b, "# svclb acceptance legs: %s\n\n", status)
	fmt.Fprintf(b, "A leg passes only if it is red with the agent's Phase flags off and green with them on; ")
	fmt.Fprintf(b, "green in both runs proves nothing and fails.\n\n")

	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(envHeader, " | "), strings.Repeat("---|", len(envHeader)))
	vals := envCells(in.env())
	for i := range vals {
		vals[i] = cell(vals[i])
	}
	fmt.Fprintf(b, "| %s |\n\n", strings.Join(vals, " | "))

	for _, f := range in.failures() {
		fmt.Fprintf(b, "**Run failure:** %s\n\n", cell(f))
	}
	for _, f := range in.suiteFailures() {
		fmt.Fprintf(b, "**Suite failure:** %s\n\n", cell(f))
	}

	fmt.Fprintf(b, "## Legs\n\n")
	if len(rows) == 0 {
		fmt.Fprintf(b, "No leg ran.\n\n")
	} else {
		fmt.Fprintf(b, "| leg | verdict | red (agent off) | green (agent on) | duration | evidence |\n|---|---|---|---|---|---|\n")
		for _, r := range rows {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", r.Name, cell(verdictCell(r)), cell(r.Red), cell(r.Green),
				fmtDur(r.Duration), cell(r.Evidence))
		}
		fmt.Fprintln(b)
		fmt.Fprintf(b, "Expectations (DESIGN.md §5):\n\n")
		for _, r := range rows {
			if r.Leg == nil {
				continue
			}
			fmt.Fprintf(b, "- **%s** — setup: %s; red: %s; green: %s\n", r.Name, r.Leg.Setup, r.Leg.RedExpect, r.Leg.GreenMeans)
		}
		fmt.Fprintln(b)
	}

	if ph := in.phases(); len(ph) > 0 {
		fmt.Fprintf(b, "## Wall time\n\n| phase | seconds |\n|---|---|\n")
		for _, p := range ph {
			fmt.Fprintf(b, "| %s | %.1f |\n", cell(p.Name), p.Seconds)
		}
		fmt.Fprintln(b)
	}

	if in.Evidence != nil && in.Evidence.Programming != nil {
		p := in.Evidence.Programming
		fmt.Fprintf(b, "## %s\n\n", programmingTitle(p))
		fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(programmingHeader, " | "), strings.Repeat("---|", len(programmingHeader)))
		for _, r := range programmingRows(p) {
			for i := range r {
				r[i] = cell(r[i])
			}
			r[programmingMetricCol] = "`" + r[programmingMetricCol] + "`"
			fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
		}
		if p.Note != "" {
			fmt.Fprintf(b, "\n%s\n", p.Note)
		}
		fmt.Fprintln(b)
	}
	return b.Flush()
}

func verdictCell(r row) string {
	v := string(r.Verdict)
	if r.Verdict.Failed() && r.Reason != "" {
		v += ": " + r.Reason
	}
	return v
}

// cell makes a string safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
