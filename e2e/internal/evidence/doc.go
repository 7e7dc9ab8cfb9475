// Package evidence is the structured record the acceptance legs write and the
// report generator reads: per leg one red run and one green run, the verdict
// that combines them, the environment (proxy, versions, nodes) and the wall
// time of each phase of `make e2e-svc`.
//
// The files live in one directory (the suite's _artifacts/):
//
//	env.json           Env: proxy, versions, nodes
//	order.json         the legs the suite defines, in the order it runs them (WriteOrder)
//	phases.tsv         "<phase>\t<seconds>" lines, appended by make and by the suite
//	legs/<leg>.json    Leg: red and green runs and the verdict
//	programming.json   Programming: network programming latency, agent vs kube-proxy
//	cni-latency.json   CNILatency: pod sandbox time with svclb-cni, enrolled vs not (opt-in figure)
package evidence
