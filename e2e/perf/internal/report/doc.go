// Package report renders the perf suite's results (e2e/perf/internal/result) and the envtest
// scale tests' (e2e/scale/scaleresult: how cost grows, held connections, on-demand CDS) as
// report.md and report.html in the artifacts directory: the goals (docs/perf.md) as
// agent/kube-proxy ratios, one table per measurement, a section per envtest test whether or
// not it ran, and, in the HTML, the latency distributions of both paths as inline SVG
// (html/template escapes every label; the page needs no script or external asset).
package report
