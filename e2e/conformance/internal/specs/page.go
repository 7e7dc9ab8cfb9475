// page: report.md and report.html of a Report, through the suites' report kit.

package specs

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
)

var (
	//go:embed report.md.tmpl
	mdTemplate string
	//go:embed report.html.tmpl
	htmlTemplate string

	page = render.MustPage(mdTemplate, htmlTemplate, nil)
)

// View is what the report's templates render: the phase table, one row per spec with a
// cell per phase run, the counts per verdict, the run's errors and the failure messages.
type View struct {
	Docs    string       // docs/peer.md as seen from the report's directory
	Phases  render.Table // one row per phase run
	Columns []string     // the phases run, in report order
	Rows    []ViewRow
	Counts  []Count
	Errors  []string
	Failed  []Failure
}

// ViewRow is one spec.
type ViewRow struct {
	Spec    string
	Cells   []string // the spec's state in each of Columns
	Verdict string
	// Deviation and Cause link the declared deviation, or a FAIL's known cause, into Docs.
	Deviation, Cause *Link
	Note             string
}

// Link is an anchor of docs/peer.md.
type Link struct{ Href, Title string }

// Count is how many specs got a verdict.
type Count struct {
	Verdict string
	N       int
}

// Failure is a failed run's message.
type Failure struct{ Phase, Spec, Message string }

// View builds what the templates render; docsLink is docs/peer.md as seen from the report.
func (r *Report) View(docsLink string) View {
	v := View{Docs: docsLink, Errors: r.Errors, Phases: render.Table{
		Header: []string{"phase", "setup", "wall", "e2e.test processes", "exit", "framework namespaces (not enrolled)"}}}
	for _, p := range r.Phases {
		ns := "—"
		if p.Enrolled {
			ns = fmt.Sprintf("%d (%d)", p.Namespaces, len(p.NotEnrolled))
		}
		v.Phases.Rows = append(v.Phases.Rows, []string{p.Phase, p.Setup, fmt.Sprintf("%.0f s", p.Seconds),
			fmt.Sprint(p.Shards), fmt.Sprint(p.ExitCode), ns})
	}
	for _, ph := range AllPhases {
		for _, p := range r.Phases {
			if p.Phase == ph {
				v.Columns = append(v.Columns, ph)
				break
			}
		}
	}
	link := func(d *Deviation) *Link {
		if d == nil {
			return nil
		}
		return &Link{Href: docsLink + "#" + d.Anchor, Title: d.Title}
	}
	for _, row := range r.Rows {
		vr := ViewRow{Spec: row.Spec, Verdict: row.Verdict, Deviation: link(row.Deviation), Cause: link(row.Cause), Note: row.Note}
		for _, ph := range v.Columns {
			res := row.Runs[ph]
			cell := res.State
			if res.State != Absent && res.State != NotReached && res.State != "" {
				cell += fmt.Sprintf(" (%.0f s)", res.Seconds)
			}
			vr.Cells = append(vr.Cells, cell)
			if res.State == Failed && res.Message != "" {
				v.Failed = append(v.Failed, Failure{Phase: ph, Spec: row.Spec, Message: strings.ReplaceAll(res.Message, "`", "'")})
			}
		}
		v.Rows = append(v.Rows, vr)
	}
	for _, verdict := range Verdicts {
		if n := r.Counts[verdict]; n > 0 {
			v.Counts = append(v.Counts, Count{Verdict: verdict, N: n})
		}
	}
	return v
}

// Markdown is report.md.
func (r *Report) Markdown(docsLink string) (string, error) {
	md, _, err := page.Bytes(r.View(docsLink))
	return string(md), err
}
