// Package report renders an evidence directory (see package evidence) and
// Ginkgo's JSON report as report.md and report.html, and gives the run its
// verdict.
//
// Build computes one Report from the Input: the header facts (proxy,
// versions, nodes, which legs the label filter selected, wall time per
// phase), one Leg per leg with its red and green runs side by side (mark,
// counts, duration, evidence, chart shapes) and the programming-latency
// table. The two outputs are templates over that one model, embedded with
// Embedded: report.md.tmpl (text/template; the tables people paste into
// notes) and report.html.tmpl (html/template; a card per leg, inline SVG,
// no external assets).
//
// A run passes only if Ginkgo's report records the selection, every
// selected leg wrote evidence and passed, and nothing failed outside the
// legs.
//
// Files, one job each: input.go (Input and what Ginkgo's report says),
// verdict.go (selection and verdict), model.go (the Report), text.go (cell
// and evidence text), charts.go (chart geometry, drawn as e2e/internal/kit/render
// charts), page.go (the templates, a render.Page), files.go (reading the
// evidence, writing the reports).
package report
