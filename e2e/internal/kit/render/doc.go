// Package render is the suites' report kit: one SVG chart type, kept as plain shapes that a
// report's HTML template writes through the kit's "chart" template, and one Page, a report's
// Markdown and HTML templates parsed with the kit's functions (cell, join) and templates
// ("chart", and "table" over the row model Table), rendered to report.md and report.html.
//
// The leg report (e2e/internal/report), the perf report (e2e/perf/internal/report), the
// soak report (e2e/soak) and the conformance report (e2e/conformance/internal/specs) draw
// their charts and write their pages with it; what each page
// says stays in its own templates. html/template escapes every label: backend, leg and node
// names come from the cluster, and the page needs no script or external asset.
package render
