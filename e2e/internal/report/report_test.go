package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/internal/testing/golden"
)

// TestGolden renders the fixture evidence directories under testdata (a
// passing run with a control leg, a drain timeline and the run's order; a
// failing one with every kind of failure, written before runs recorded
// their order, so its legs are in name order) and compares both reports
// with their golden files, and the one-screen summary of each.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		dir     string
		failure string
		passed  bool
	}{{"passed", "", true}, {"failed", "make e2e-svc: the suite exited 1", false}} {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join("testdata", c.dir)
			in, err := Load(dir, filepath.Join(dir, "ginkgo.json"))
			if err != nil {
				t.Fatal(err)
			}
			in.Failure = c.failure
			r := Build(in)
			if r.Passed != c.passed {
				t.Fatalf("Passed = %v, want %v (%s)", r.Passed, c.passed, r.Tally)
			}
			for _, out := range []struct {
				ext    string
				render func(io.Writer) error
			}{{"md", r.Markdown}, {"html", r.HTML}, {"summary", r.Summary}} {
				var b bytes.Buffer
				if err := out.render(&b); err != nil {
					t.Fatal(err)
				}
				golden.Check(t, filepath.Join("testdata", c.dir+".report."+out.ext+".golden"), b.Bytes())
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	in := Input{Evidence: sample(), Ginkgo: ginkgoRun("", map[string]types.SpecState{"reach": types.SpecStatePassed, "drain": types.SpecStateFailed})}
	if err := Build(in).Markdown(&b); err != nil {
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
		"**Legs selected:** reach, drain (no label filter: every leg); 1 of 2 selected legs passed.",
		"| cluster create | 60.0 |",
		"| svclb agent | `svclb_network_programming_duration_seconds` | 5 | 50 ms | 200 ms |",
		"| kube-proxy | `` | 0 | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
	if Build(in).Passed {
		t.Fatal("a proves-nothing leg must fail the run")
	}
	in.Evidence.Legs = in.Evidence.Legs[:1]
	in.Ginkgo = ginkgoRun("reach", map[string]types.SpecState{"reach": types.SpecStatePassed, "drain": types.SpecStateSkipped})
	if !Build(in).Passed {
		t.Fatal("one selected leg that passed, and nothing else, must pass")
	}
	in.Failure = "make cluster failed"
	if Build(in).Passed {
		t.Fatal("a failure outside the suite must fail the run")
	}
	if Build(Input{}).Passed {
		t.Fatal("no legs at all must not pass")
	}
}

func TestHTMLIsWellFormedAndEscaped(t *testing.T) {
	var b bytes.Buffer
	if err := Build(Input{Evidence: sample()}).HTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if strings.Contains(h, "b<script>") {
		t.Fatal("backend names must be escaped")
	}
	if !strings.Contains(h, "not recorded: no usable ginkgo.json") {
		t.Error("without ginkgo.json the header must say the selection is not recorded")
	}
	// The programming table comes from the same rows as report.md's.
	if want := "<tr><td>svclb agent</td><td><code>svclb_network_programming_duration_seconds</code></td><td>5</td><td>50 ms</td><td>200 ms</td></tr>"; !strings.Contains(h, want) {
		t.Errorf("report.html lacks %q", want)
	}
	if n := strings.Count(h, "<svg"); n < 3 {
		t.Fatalf("want charts for distribution, drain timeline and phases, got %d svg", n)
	}
	// Read offline: nothing to fetch, no script; the only URLs are SVG namespaces.
	for _, bad := range []string{"<script", "<link", " src="} {
		if strings.Contains(h, bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	if n, svg := strings.Count(h, "://"), strings.Count(h, `xmlns="http://www.w3.org/2000/svg"`); n != svg {
		t.Errorf("report.html has %d URLs, %d of them SVG namespaces", n, svg)
	}
	// Every chart must parse as XML on its own (browsers are lenient; reviewers are not).
	for _, part := range strings.Split(h, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")] + "</svg>"
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := d.Token(); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("svg is not well-formed: %v\n%s", err, svg)
			}
		}
	}
}

func TestGinkgoOnlyLegGetsARow(t *testing.T) {
	rep := types.Report{SuiteConfig: types.SuiteConfig{LabelFilter: "drain || programming"}, SpecReports: types.SpecReports{
		legSpec("drain", types.SpecStatePanicked, "nil map\nstack"),
		legSpec("topology", types.SpecStateSkipped, ""),
		{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStateFailed, Failure: types.Failure{Message: "deploy guard: timeout"}},
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "compares", LeafNodeLabels: []string{"programming"}, State: types.SpecStateFailed, Failure: types.Failure{Message: "no samples"}},
	}}
	var b bytes.Buffer
	if err := Build(Input{Ginkgo: []types.Report{rep}}).Markdown(&b); err != nil {
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
	if len(in.Evidence.Legs) != 2 || in.Ginkgo != nil {
		t.Fatalf("loaded %d legs, ginkgo %v", len(in.Evidence.Legs), in.Ginkgo)
	}
	if err := WriteFiles(dir, Build(in)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "**Legs selected:** selection not recorded; no usable ginkgo.json, so the run cannot pass") {
		t.Fatalf("without ginkgo.json report.md must say the selection is not recorded (%v):\n%s", err, md)
	}
	if err := os.WriteFile(filepath.Join(dir, "ginkgo.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, filepath.Join(dir, "ginkgo.json")); err == nil {
		t.Fatal("a corrupt Ginkgo report must be an error")
	}
	if err := WriteFiles(filepath.Join(dir, "missing"), Build(in)); err == nil {
		t.Fatal("writing into a missing directory must be an error")
	}
}
