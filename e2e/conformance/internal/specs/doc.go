// Package specs reads what Kubernetes' own e2e suite reports for the set
// `make e2e-peer` runs (its JUnit file, one per phase), gives each spec its
// verdict and writes peer's report: report.md for people, peer.json for the
// lead's e2e report to fold in later.
//
// A verdict is the green run's result held against the deviations Proposal 044
// declares (Deviations): PASS, EXPECTED DEVIATION (a declared reason, written
// once in docs/peer.md and linked from the row), SKIPPED (upstream's own skip,
// with its reason) or FAIL. The red run (Phase flags off) is reported beside
// it: a spec that passes red was not served through the agent.
package specs
