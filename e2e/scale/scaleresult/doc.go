// Package scaleresult holds what the envtest scale tests of e2e/scale (TestGrowth, TestHeld,
// TestOnDemand) measure, as the JSON files they write into the perf results directory, and
// reads them back for the perf report (e2e/perf/internal/report). It sits between the two
// so that neither imports the other: the tests pull in client-go and a Kubernetes harness
// the report has no use for, and the report's packages are internal to e2e/perf.
package scaleresult
