package specs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleReport holds a row of each kind the page draws differently: a pass, a declared
// deviation, a FAIL with a known cause and a note, and text that Markdown or HTML would
// misread (a pipe, a tag).
func sampleReport() *Report {
	return &Report{
		Phases: []PhaseRun{
			{Phase: PhaseKubeProxy, Setup: "kube-proxy only", Seconds: 61.2, Shards: 2},
			{Phase: PhaseGreen, Setup: "enrolled, cut, flags on", Seconds: 90.6, Shards: 2, ExitCode: 1, Enrolled: true, Namespaces: 3},
		},
		Rows: []Row{
			{Spec: "should serve a basic endpoint from pods", Verdict: Pass,
				Runs: map[string]Result{PhaseKubeProxy: {State: Passed, Seconds: 12}, PhaseGreen: {State: Passed, Seconds: 14}}},
			{Spec: "should have session affinity timeout work", Verdict: ExpectedDeviation, Deviation: &AffinityTimeout,
				Runs: map[string]Result{PhaseKubeProxy: {State: Passed, Seconds: 3}, PhaseGreen: {State: Failed, Seconds: 4, Message: "dial `x`: EOF"}}},
			{Spec: "should preserve source pod IP <script>", Verdict: Fail, Note: "red | passed", Cause: &Deviation{Anchor: "the-backend-sees-the-nodes-address", Title: "the backend sees the node's address"},
				Runs: map[string]Result{PhaseKubeProxy: {State: Passed, Seconds: 5}, PhaseGreen: {State: Failed, Seconds: 6}}},
		},
		Counts: map[string]int{Pass: 1, ExpectedDeviation: 1, Fail: 1},
		Errors: []string{"green: 1 of 2 JUnit reports"},
	}
}

// TestReportPage: report.md and report.html carry the phase table, a column per phase run,
// each verdict linked to its reason in docs/peer.md, the counts, the errors and the failure
// messages; the Markdown escapes a pipe in a cell and the HTML escapes a tag.
func TestReportPage(t *testing.T) {
	dir := t.TempDir()
	if err := sampleReport().Write(dir, "../docs/peer.md"); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	md, html := read("report.md"), read("report.html")
	for _, want := range []string{
		"| phase | setup | wall | e2e.test processes | exit | framework namespaces (not enrolled) |",
		"| green | enrolled, cut, flags on | 91 s | 2 | 1 | 3 (0) |",
		"| kube-proxy | kube-proxy only | 61 s | 2 | 0 | — |",
		"| spec | kube-proxy | green | verdict | note |\n|---|---|---|---|---|\n",
		"| should serve a basic endpoint from pods | passed (12 s) | passed (14 s) | PASS |  |",
		"| should have session affinity timeout work | passed (3 s) | failed (4 s) | [EXPECTED DEVIATION](../docs/peer.md#sessionaffinityconfigtimeoutseconds-has-no-envoy-counterpart): sessionAffinityConfig.timeoutSeconds has no Envoy counterpart |  |",
		"| FAIL | red \\| passed; known cause: [the backend sees the node's address](../docs/peer.md#the-backend-sees-the-nodes-address) |",
		"- PASS: 1\n- EXPECTED DEVIATION: 1\n- FAIL: 1\n- error: green: 1 of 2 JUnit reports\n",
		"## Failure messages\n\n- green, should have session affinity timeout work: `dial 'x': EOF`\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{
		`<a href="../docs/peer.md#sessionaffinityconfigtimeoutseconds-has-no-envoy-counterpart">EXPECTED DEVIATION</a>`,
		`should preserve source pod IP &lt;script&gt;`,
		`<li>FAIL: 1</li>`,
		`<code>dial &#39;x&#39;: EOF</code>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q:\n%s", want, html)
		}
	}
	if strings.Contains(html, "<script>") {
		t.Error("report.html carries a spec's <script> unescaped")
	}
}
