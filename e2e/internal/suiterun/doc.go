// Package e2esuite drives the acceptance suite's own binaries for svclb-e2e: it never
// reimplements a leg. The suite binary is e2e/'s test binary (go test -c ./e2e, as make
// e2e-svc builds it), configured by the environment e2e/suite_test.go reads (Config.Env);
// the report is e2e/cmd/report's.
//
//	binaries.go  where the two binaries are, building them from the repository
//	filter.go    --legs as a Ginkgo label filter (a list of names means any of them)
//	legs.go      the legs and their labels: a dry run of the suite binary (TestLegsList)
//	config.go    a run's settings and the suite binary's environment and flags
//	runner.go    a run: the suite binary in its own process group, its output in e2e.log; on
//	             SIGINT or SIGTERM the signal is forwarded once, the suite given Grace to
//	             write its reports, then Restore runs (the guard removed, the cuts put back)
//	             and the report is still rendered
//	report.go    e2e/cmd/report over the artifacts: report.md, report.html, the verdict table
package suiterun
