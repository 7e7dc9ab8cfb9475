// Package kit is what every suite of e2e/ shares to run: one progress logger (Progress) and
// one reader of the environment the make targets set (Env). Its subpackage render is the
// reports' kit (charts and pages), and kit.sh the run.sh scripts' (progress lines, the node
// proxy's choice).
//
// The suites: the acceptance legs (e2e/), the perf suite (e2e/perf), the soak (e2e/soak),
// the scale tests (e2e/scale) and the conformance runner (e2e/conformance/cmd/conformance).
// It lives under e2e/internal, not fixtures/: fixtures is the framework other suites import
// to drive svclb, this is how svclb's own suites report and are configured.
package kit
