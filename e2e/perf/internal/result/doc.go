// Package result holds what the perf suite (e2e/perf/) measures, as JSON files
// in its artifacts directory, one per measurement, so that separate runs (the
// base run, each size) make one report (e2e/perf/internal/report). Latencies
// are milliseconds; quantiles are nearest-rank; every measurement carries the
// machine's load around it.
package result
