package soak

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRefusedRows sets each proxy's NC count beside the NC refusals its
// agent logged: the record's one logged NC (on w2) leaves w1's three
// unlogged, and the report says so.
func TestRefusedRows(t *testing.T) {
	r := record()
	r.Refusals = append(r.Refusals, Refusal{Time: at(-5), Node: "w1", Reason: "no-service", Flag: "NC"}) // before the load: not counted
	r.Figures.ProxyNC = map[string]int64{"w2": 1, "w1": 3}
	Analyze(r)
	want := []RefusedRow{{Node: "w1", Proxy: 3, Agent: 0, Unlogged: 3}, {Node: "w2", Proxy: 1, Agent: 1, Unlogged: 0}}
	if !slices.Equal(r.Figures.Refused, want) {
		t.Fatalf("refused rows %+v, want %+v", r.Figures.Refused, want)
	}
	dir := t.TempDir()
	if err := Write(dir, r, 0); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| w1 | 3 | 0 | 3 |") {
		t.Errorf("report.md lacks w1's unlogged NC closes:\n%s", md)
	}
}
