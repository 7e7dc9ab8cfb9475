package report

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

func sample() *evidence.Set {
	red := &evidence.Run{Mode: evidence.Red, MetRed: true, Summary: "0/10 replies, 10 ECONNREFUSED",
		Attempts: 10, HostRefused: 10, Duration: 2 * time.Second}
	green := &evidence.Run{Mode: evidence.Green, MetGreen: true, Summary: "10/10 replies", Attempts: 10, Replies: 10,
		Backends: map[string]int{"echo-1@w1/zone-a": 6, "echo-2@w2/zone-b": 4},
		Counters: map[string]float64{`svclb_svc_refused_total{reason="no-endpoints"}`: 0}, Duration: 3 * time.Second}
	v, why := evidence.Judge(red, green)
	drainGreen := &evidence.Run{Mode: evidence.Green, MetGreen: true, Timeline: []evidence.Sample{
		{At: 0, Stage: "1 ready", Backend: "a", BackendState: "ready", Outcome: "reply"},
		{At: time.Second, Stage: "0 ready", Backend: "b<script>", BackendState: "terminating", Outcome: "reply"},
	}}
	return &evidence.Set{
		Env: &evidence.Env{Proxy: "builtin", KubernetesVersion: "v1.34.4", KindVersion: "v0.33.0", EnvoyVersion: "n/a",
			Nodes: []evidence.Node{{Name: "svclb-worker", Zone: "zone-a"}}},
		Legs: []*evidence.Leg{
			{Name: "reach", Red: red, Green: green, Verdict: v, Reason: why, Duration: 5 * time.Second, Setup: "s", GreenMeans: "g", RedExpect: "r"},
			{Name: "drain", Red: &evidence.Run{Mode: evidence.Red, MetGreen: true, Summary: "a|b"}, Green: drainGreen,
				Verdict: evidence.ProvesNothing, Reason: "green with the agent off"},
		},
		Phases:      []evidence.Phase{{Name: "cluster create", Seconds: 60}, {Name: "total", Seconds: 300}},
		Programming: &evidence.Programming{Changes: 5, Agent: evidence.Quantiles{Metric: "svclb_network_programming_duration_seconds", Count: 5, P50: 0.05, P99: 0.2}},
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	in := Input{Evidence: sample()}
	if err := Markdown(&b, in); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"# svclb acceptance legs: FAILED", // drain proves nothing
		"| reach | pass |",
		"| drain | proves nothing: green with the agent off |",
		`a\|b`, // pipes escaped inside cells
		"backends echo-1@w1/zone-a=6 echo-2@w2/zone-b=4",
		"| builtin | v1.34.4 | v0.33.0 |",
		"| cluster create | 60.0 |",
		"| svclb agent | `svclb_network_programming_duration_seconds` | 5 | 50 ms | 200 ms |",
		"| kube-proxy | `` | 0 | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
	if in.Passed() {
		t.Fatal("a proves-nothing leg must fail the run")
	}
	in.Evidence.Legs = in.Evidence.Legs[:1]
	if !in.Passed() {
		t.Fatal("one passing leg and nothing else must pass")
	}
	in.Failure = "make cluster failed"
	if in.Passed() {
		t.Fatal("a failure outside the suite must fail the run")
	}
	if (Input{}).Passed() {
		t.Fatal("no legs at all must not pass")
	}
}

func TestHTMLIsWellFormedAndEscaped(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, Input{Evidence: sample()}); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if strings.Contains(h, "b<script>") {
		t.Fatal("backend names must be escaped")
	}
	// The programming table comes from the same rows as report.md's.
	if want := "<tr><td>svclb agent</td><td><code>svclb_network_programming_duration_seconds</code></td><td>5</td><td>50 ms</td><td>200 ms</td></tr>"; !strings.Contains(h, want) {
		t.Errorf("report.html lacks %q", want)
	}
	if n := strings.Count(h, "<svg"); n < 3 {
		t.Fatalf("want charts for distribution, drain timeline and phases, got %d svg", n)
	}
	// Every chart must parse as XML on its own (browsers are lenient; reviewers are not).
	for _, part := range strings.Split(h, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")] + "</svg>"
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("svg is not well-formed: %v\n%s", err, svg)
			}
		}
	}
}

func TestGinkgoOnlyLegGetsARow(t *testing.T) {
	rep := types.Report{SpecReports: types.SpecReports{
		{LeafNodeType: types.NodeTypeIt, LeafNodeLabels: []string{"drain"}, State: types.SpecStatePanicked,
			Failure: types.Failure{Message: "nil map\nstack"}},
		{LeafNodeType: types.NodeTypeIt, LeafNodeLabels: []string{"topology"}, State: types.SpecStateSkipped},
		{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStateFailed, Failure: types.Failure{Message: "deploy guard: timeout"}},
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "compares", LeafNodeLabels: []string{"programming"}, State: types.SpecStateFailed, Failure: types.Failure{Message: "no samples"}},
	}}
	in := Input{Ginkgo: []types.Report{rep}}
	var b bytes.Buffer
	if err := Markdown(&b, in); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"| drain | incomplete: panicked: nil map |", "**Suite failure:** BeforeSuite: deploy guard: timeout", "**Suite failure:** compares: no samples"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
	if strings.Contains(md, "| topology |") {
		t.Error("a skipped leg (label filter) must not get a row")
	}
}

func TestLoadAndWriteFiles(t *testing.T) {
	dir := t.TempDir()
	d := evidence.Dir(dir)
	s := sample()
	for _, l := range s.Legs {
		if err := d.WriteLeg(l); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Load(dir, filepath.Join(dir, "ginkgo.json")) // absent: fine
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, in); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ginkgo.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, filepath.Join(dir, "ginkgo.json")); err == nil {
		t.Fatal("a corrupt Ginkgo report must be an error")
	}
}
