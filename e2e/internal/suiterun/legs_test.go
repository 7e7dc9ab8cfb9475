package suiterun

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestParseLegs reads a dry run of the suite (testdata/dryrun.json: TestLegsList under the
// label filter reach,cni-latency, trimmed to the fields read): every leg and figure in run
// order, with its labels, the selected ones marked.
func TestParseLegs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "dryrun.json"))
	if err != nil {
		t.Fatal(err)
	}
	legs, err := ParseLegs(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(legs) < 30 || legs[0].Name != "reach" || legs[1].Name != "reach-after-resync" {
		t.Fatalf("legs %v: want every leg, reach first", legs)
	}
	var selected []string
	byName := map[string]Leg{}
	for _, l := range legs {
		byName[l.Name] = l
		if l.Selected {
			selected = append(selected, l.Name)
		}
	}
	if !slices.Equal(selected, []string{"reach", "cni-latency"}) {
		t.Errorf("selected %v, want reach and cni-latency", selected)
	}
	if l := byName["reach"]; !slices.Equal(l.Labels, []string{"leg", "reach"}) {
		t.Errorf("reach labels %v", l.Labels)
	}
	if l := byName["cni-latency"]; !slices.Equal(l.Labels, []string{"cni-latency", "opt-in"}) {
		t.Errorf("cni-latency labels %v", l.Labels)
	}
	if _, ok := byName["programming"]; !ok {
		t.Error("the programming figure is not listed")
	}
	if _, err := ParseLegs([]byte("[]")); err == nil {
		t.Error("a report without specs must be an error")
	}
}
