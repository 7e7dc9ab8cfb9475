package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/internal/testing/golden"
)

// reportRecord is record() judged, with a sample, a split and snapshots.
func reportRecord() *Record {
	r := record()
	r.Samples = []Sample{{Time: at(1), Node: "w1", Agent: Proc{PID: 1, RSS: 10 << 20}, Proxy: Proc{PID: 2, RSS: 20 << 20}}}
	r.Figures.Split = []SplitRow{{Node: "w1", Svc: 90, Passthrough: 10}}
	r.Figures.Snapshots = []Snapshot{{When: "setup, proactive", Node: "w1", SvcClusters: 40, CDSBytes: 30000, EDSBytes: 10000}, {When: "end", Node: "w1", SvcClusters: 5, CDSBytes: 3000, EDSBytes: 1000}}
	Analyze(r)
	return r
}

// TestWriteGolden: both reports of reportRecord, byte for byte (times in UTC).
func TestWriteGolden(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.UTC
	dir := t.TempDir()
	if err := Write(dir, reportRecord(), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	golden.CheckFiles(t, dir, "report.md", "report.html")
}

// TestWrite renders a judged record: every section is there, the failure
// reasons of a failed run come first.
func TestWrite(t *testing.T) {
	r := reportRecord()
	dir := t.TempDir()
	if err := Write(dir, r, 0); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	for _, want := range []string{"# svclb soak: PASS", "| 3 | proxy |", "1 no-endpoints", "| w1 | 40 / 39.1 KiB | 5 / 3.9 KiB | 0.12 | 0.10 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{"<polyline", "fill-opacity=\"0.25\"", "load-w1 on w1"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	r.Clients[1].Events = r.Clients[1].Events[:40]
	Analyze(r)
	if err := Write(dir, r, 0); err != nil {
		t.Fatal(err)
	}
	md, _ = os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "# svclb soak: FAIL\n") || !strings.Contains(string(md), "## Why it failed") {
		t.Errorf("a failed run's report:\n%s", md)
	}
}

// TestWriteSkipped: a fault that did not run on the cluster reads as skipped in both reports,
// its row and the header naming it, never as ok; the node access and why are in the header.
func TestWriteSkipped(t *testing.T) {
	r := record()
	r.Env.NodeAccess, r.Env.NodeAccessWhy = "daemonset", "node w1 is not a container of the local Docker engine"
	r.Windows = append(r.Windows, Window{Name: "worker w2 lost and back", Kind: KindNodeLoss, Node: "w2", Start: at(90), End: at(90), Skipped: true,
		Notes: []string{"skipped: the nodes are not containers of the local Docker engine (kind): node w1 is not a container"}})
	Analyze(r)
	dir := t.TempDir()
	if err := Write(dir, r, 0); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	for _, want := range []string{
		"| 6 | worker w2 lost and back | 90.0 s | 0.0 s | 0 | skipped | 0 |  | skipped: the nodes are not containers",
		"**Skipped, not run** (the fault table says why): worker w2 lost and back.",
		"nodes w1, w2 (read by daemonset: node w1 is not a container of the local Docker engine);",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{"<td>skipped</td>", "<b>Skipped, not run</b>", "(read by daemonset: "} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
