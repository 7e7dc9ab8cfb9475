// Command conformance runs Kubernetes' own sig-network Service specs (a built
// k8s.io/kubernetes/test/e2e binary, v1.34.4) through the agent on the kind
// cluster and writes peer's report: `make e2e-peer`
// (e2e/conformance/conformance.mk, e2e/conformance/run.sh) calls it;
// docs/peer.md says what it proves.
//
// Phases, each one run of the e2e binary with the set's focus:
//
//	kube-proxy  baseline: nothing enrolled, nothing cut (what upstream sees)
//	red         enrolled and cut, the agent's Phase flags off: must fail
//	green       enrolled and cut, Phase flags on: PASS or a declared deviation
//
// red and green share one set-up (package enroll); the cluster is restored
// after the last phase. The report (report.md, report.html, peer.json) is rebuilt from
// every phase found in the artifacts directory, so phases run by separate
// invocations (one phase each) land in one table.
package main
