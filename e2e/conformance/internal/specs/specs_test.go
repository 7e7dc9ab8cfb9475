package specs

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// setFile is the set `make e2e-peer` runs.
const setFile = "../../focus.txt"

func readSet(t *testing.T) []string {
	t.Helper()
	set, err := ReadSet(setFile)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestParseJUnit reads a report e2e.test wrote on the kind cluster with
// plain kube-proxy (trimmed to the set, one spec turned into a failure).
func TestParseJUnit(t *testing.T) {
	res, err := ReadJUnit("testdata/junit_01.xml")
	if err != nil {
		t.Fatal(err)
	}
	set := readSet(t)
	want := map[string]string{
		"Services should serve a basic endpoint from pods":                                                          Failed,
		"Traffic Distribution should route traffic correctly between pods on multiple nodes when using PreferClose": Skipped,
		"Services should have session affinity work for service with type clusterIP [LinuxOnly]":                    Passed,
	}
	for _, name := range set {
		r := Find(res, name)
		w, ok := want[name]
		if !ok {
			w = Passed
		}
		if r.State != w {
			t.Errorf("%s: state %q, want %q", name, r.State, w)
		}
	}
	if r := Find(res, "Services should serve a basic endpoint from pods"); !strings.HasPrefix(r.Message, "[FAILED] failed to validate endpoints") {
		t.Errorf("failure message %q", r.Message)
	}
	if r := Find(res, "Traffic Distribution should route traffic correctly between pods on multiple nodes when using PreferClose"); !strings.Contains(r.Message, "need at least 3 zones") {
		t.Errorf("skip message %q", r.Message)
	}
	if r := Find(res, "Services should have session affinity work for NodePort service [LinuxOnly]"); r.State != NotReached {
		t.Errorf("a spec the focus left out: %+v", r)
	}
	if r := Find(res, "Services should not exist"); r.State != Absent {
		t.Errorf("unknown spec: %+v", r)
	}
}

// TestFocus: the regex selects each entry of the set as Ginkgo spells it
// (with its labels), and not the specs whose names start alike.
func TestFocus(t *testing.T) {
	set := readSet(t)
	re := regexp.MustCompile(Focus(set))
	for _, name := range set {
		for _, full := range []string{Prefix + name, Prefix + name + " [Conformance]"} {
			if !re.MatchString(full) {
				t.Errorf("focus misses %q", full)
			}
			if !Matches(full, name) {
				t.Errorf("Matches(%q, %q) = false", full, name)
			}
		}
	}
	for _, other := range []string{
		"[sig-network] Services should have session affinity work for NodePort service [LinuxOnly] [Conformance]",
		"[sig-network] Services should be rejected for evicted pods (no endpoints exist)",
		"[sig-network] Traffic Distribution should route traffic to an endpoint in the same zone when using PreferSameZone",
	} {
		if re.MatchString(other) {
			t.Errorf("focus selects %q", other)
		}
	}
	if Matches(Prefix+"Services should serve a basic endpoint from pods2", "Services should serve a basic endpoint from pods") {
		t.Error("Matches takes a longer name for the entry")
	}
	// An upstream text that ends in a space: the JUnit name has none, the
	// focus (from --list-tests) keeps it.
	trailing := "Services should be updated after adding or deleting ports "
	if !Matches(Prefix+strings.TrimSpace(trailing), trailing) {
		t.Errorf("Matches misses %q as the JUnit report spells it", trailing)
	}
	if !regexp.MustCompile(Focus([]string{trailing})).MatchString(Prefix + trailing + " [sig-network]") {
		t.Errorf("focus misses %q as Ginkgo spells it", trailing)
	}
}

func TestJudge(t *testing.T) {
	dev := "Services should have session affinity timeout work for service with type clusterIP [LinuxOnly]"
	refused := "Services should be rejected when no endpoints exist"
	other := "Services should serve a basic endpoint from pods"
	failed := func(name string) Result { return Result{Name: Prefix + name, State: Failed} }
	passed := func(name string) Result { return Result{Name: Prefix + name, State: Passed} }
	for _, tc := range []struct {
		name, spec string
		runs       map[string]Result
		verdict    string
		note       string
	}{
		{"green passes", other, map[string]Result{PhaseRed: failed(other), PhaseGreen: passed(other)}, Pass, ""},
		{"red passes too", other, map[string]Result{PhaseRed: passed(other), PhaseGreen: passed(other)}, Pass, "red passed"},
		{"undeclared failure", other, map[string]Result{PhaseRed: failed(other), PhaseGreen: failed(other)}, Fail, ""},
		{"declared deviation", dev, map[string]Result{PhaseRed: failed(dev), PhaseGreen: failed(dev)}, ExpectedDeviation, ""},
		// refusal: reset refuses at the SYN, as kube-proxy does: no deviation.
		{"refusal is no deviation", refused, map[string]Result{PhaseRed: failed(refused), PhaseGreen: failed(refused)}, Fail, ""},
		{"skipped", other, map[string]Result{PhaseGreen: {State: Skipped, Message: "need 3 zones"}}, SkippedVerdict, "need 3 zones"},
		{"green absent", other, map[string]Result{PhaseRed: failed(other), PhaseGreen: {State: Absent}}, NotRun, ""},
		{"green not reached", other, map[string]Result{PhaseRed: failed(other), PhaseGreen: {State: NotReached}}, NotRun, ""},
		{"baseline only", other, map[string]Result{PhaseKubeProxy: passed(other)}, Pass, ""},
	} {
		row := Judge(tc.spec, tc.runs)
		if row.Verdict != tc.verdict || !strings.Contains(row.Note, tc.note) {
			t.Errorf("%s: verdict %q note %q, want %q note containing %q", tc.name, row.Verdict, row.Note, tc.verdict, tc.note)
		}
		if (row.Verdict == ExpectedDeviation) != (row.Deviation != nil) {
			t.Errorf("%s: deviation %+v with verdict %s", tc.name, row.Deviation, row.Verdict)
		}
	}
}

// TestDeviationsAreDocumented: each declared deviation names an entry of the
// core set or of the services set (testdata, as a run saved it) and links a
// heading of docs/peer.md.
func TestDeviationsAreDocumented(t *testing.T) {
	set := readSet(t)
	services, err := ReadSet("testdata/services-set.txt")
	if err != nil {
		t.Fatal(err)
	}
	set = append(set, services...)
	doc, err := os.ReadFile("../../../../docs/peer.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for l := range strings.SplitSeq(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			anchors[slug(h)] = true
		}
	}
	all := maps.Clone(Deviations)
	maps.Copy(all, Causes)
	for spec := range Causes {
		if _, ok := Deviations[spec]; ok {
			t.Errorf("%q: both a deviation and a known cause", spec)
		}
	}
	for spec, d := range all {
		if !slices.Contains(set, spec) {
			t.Errorf("deviation for %q: not in %s or the services set", spec, setFile)
		}
		if !anchors[d.Anchor] {
			t.Errorf("deviation %q: docs/peer.md has no heading with anchor #%s", d.Title, d.Anchor)
		}
	}
}

// slug is the anchor GitHub gives a heading: lower case, punctuation but
// hyphens dropped, spaces to hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestShardsMerge: every shard lists every spec, the ones its focus left out
// as skipped "skipped"; the shard that ran a spec decides it, and a missing
// shard's report is an error.
func TestShardsMerge(t *testing.T) {
	a := "Services should serve a basic endpoint from pods"
	b := "Services should serve multiport endpoints from pods"
	c := "Traffic Distribution should route traffic correctly between pods on multiple nodes when using PreferClose"
	tc := func(name, status, child string) string {
		return fmt.Sprintf(`<testcase name="[It] %s%s" status="%s" time="1">%s</testcase>`, Prefix, name, status, child)
	}
	notRun := `<skipped message="skipped"></skipped>`
	d := "Services should respect internalTrafficPolicy=Local Pod to Pod" // the suite's timeout came first
	dir := t.TempDir()
	write := func(shard string, cases ...string) {
		d := filepath.Join(dir, PhaseGreen, shard)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		x := `<testsuites><testsuite>` + strings.Join(cases, "") + `</testsuite></testsuites>`
		if err := os.WriteFile(filepath.Join(d, "junit_01.xml"), []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("shard-1", tc(a, "passed", ""), tc(b, "skipped", notRun), tc(c, "skipped", notRun), tc(d, "skipped", notRun))
	write("shard-2", tc(a, "skipped", notRun), tc(b, "failed", `<failure message="boom"></failure>`),
		tc(c, "skipped", `<skipped message="skipped - need at least 3 zones"></skipped>`), tc(d, "skipped", notRun))
	res, err := readPhase(dir, PhaseGreen, 2)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{a: Passed, b: Failed, c: Skipped, d: NotReached} {
		if r := Find(res, name); r.State != want {
			t.Errorf("%s: %s, want %s", name, r.State, want)
		}
	}
	if r := Find(res, c); !strings.Contains(r.Message, "3 zones") {
		t.Errorf("run-time skip message lost: %q", r.Message)
	}
	if _, err := readPhase(dir, PhaseGreen, 3); err == nil {
		t.Error("a missing shard's report is not an error")
	}
}

// TestShares: every spec in exactly one share, the Alone ones by themselves,
// the rest spread evenly.
func TestShares(t *testing.T) {
	set := readSet(t)
	for _, n := range []int{1, 3, 5, 8, 40} {
		shares := Shares(set, n)
		if len(shares) > max(n, len(Alone)+1) {
			t.Errorf("n=%d: %d shares", n, len(shares))
		}
		var all []string
		minRest, maxRest := len(set), 0
		for _, sh := range shares {
			all = append(all, sh...)
			if len(sh) == 1 {
				if _, ok := Alone[sh[0]]; ok {
					continue
				}
			}
			for _, name := range sh {
				if _, ok := Alone[name]; ok {
					t.Errorf("n=%d: %q shares a process with %v", n, name, sh)
				}
			}
			minRest, maxRest = min(minRest, len(sh)), max(maxRest, len(sh))
		}
		slices.Sort(all)
		want := slices.Sorted(slices.Values(set))
		if !slices.Equal(all, want) {
			t.Errorf("n=%d: shares hold %d specs, want each of %d once", n, len(all), len(set))
		}
		if maxRest-minRest > 1 {
			t.Errorf("n=%d: uneven shares (%d..%d)", n, minRest, maxRest)
		}
	}
}
