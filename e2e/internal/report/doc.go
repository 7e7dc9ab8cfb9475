// Package report renders an evidence directory (see package evidence) and,
// when present, Ginkgo's JSON report as report.md and report.html: one row per
// leg with its red and green results, duration and evidence, the proxy and
// versions that ran, the wall time of each phase, and small inline SVG charts.
package report
