// Package result holds what the perf suite (perf/) measures, as JSON files in
// its artifacts directory, one per measurement, so that separate runs (the
// base run, each size) make one report (perf/internal/report). Latencies are
// milliseconds; quantiles are nearest-rank; every measurement carries the
// machine's load around it.
package result
