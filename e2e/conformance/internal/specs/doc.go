// Package specs knows the sets `make e2e-peer` runs (core: a file of names;
// services: every spec of Kubernetes' Service files, as e2e.test --list-tests
// lists them), plans a phase (side by side, then [Serial] and [Disruptive]
// alone, the rest skipped with the label that rules them out on kind), reads
// what the e2e suite reports (its JUnit files, per phase), gives each spec its
// verdict and writes the report: report.md and report.html for people (page.go,
// through the suites' report kit), peer.json for e2e's report to fold in.
//
// A verdict is the green run's result held against the deviations Proposal 044
// declares (Deviations): PASS, EXPECTED DEVIATION (a declared reason, written
// once in docs/peer.md and linked from the row), SKIPPED (upstream's own skip,
// with its reason), FAILS ON KUBE-PROXY TOO (the baseline phase failed it as
// well: it says nothing about the agent) or FAIL. The red run (Phase flags
// off) is reported beside it: a spec that passes red was not served through
// the agent, and the row says why.
package specs
