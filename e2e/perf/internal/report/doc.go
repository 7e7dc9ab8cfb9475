// Package report renders the perf suite's results (e2e/perf/internal/result) as
// report.md and report.html in the artifacts directory: the goals (docs/perf.md)
// as agent/kube-proxy ratios, one table per measurement, and, in the HTML,
// the latency distributions of both paths as inline SVG (html/template
// escapes every label; the page needs no script or external asset).
package report
