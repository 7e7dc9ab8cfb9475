// Package e2e holds svclb's acceptance legs (DESIGN.md §5) as a Ginkgo v2
// suite set up through sigs.k8s.io/e2e-framework env funcs. Each leg runs red
// (the agent's Phase flags off: today's behaviour) and then green (on); it
// passes only if red shows the failure the leg expects and green the fix.
//
// The suite needs the kind cluster of kindconfig/ and the images of fixtures/;
// `make e2e-svc` provides both, runs it and renders the reports. Without
// SVCLB_E2E=1 the suite skips, so `go test ./...` needs no cluster.
//
// Evidence (per-leg JSON, phase wall times, environment) goes to
// $SVCLB_ARTIFACTS (default _artifacts/); e2e/cmd/report renders it.
package e2e
