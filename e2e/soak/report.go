package soak

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
)

//go:embed report.md.tmpl
var mdTemplate string

//go:embed report.html.tmpl
var htmlTemplate string

// Report is what the templates render.
type Report struct {
	*Record
	Status string
	Took   time.Duration
	Faults []FaultRow
	// Skipped are the windows whose fault did not run (their notes say why).
	Skipped  []string
	Charts   []NamedChart
	RSS      *render.Chart
	Snapshot []SnapshotRow
	Redel    []RedelRow
	// Allowed sums the allowed failures by window, client, target and
	// class; Disallowed lists every other one.
	Allowed    []AllowedRow
	Disallowed []Attributed
	// Stalled sums the machine's stalls of the load clients.
	Stalled StallSum
}

// StallSum sums the stalls.
type StallSum struct {
	N              int
	Total, Longest time.Duration
}

// AllowedRow is a group of allowed failures.
type AllowedRow struct {
	Window, Client, Target, Class string
	N                             int
	First, Last                   time.Time
	Why                           string
}

// FaultRow is one line of the fault table.
type FaultRow struct {
	N        int
	Name     string
	At       float64 // seconds after the load started
	Seconds  float64
	Failures string // by class
	Verdict  string
	Cuts     int
	Refused  string
	Notes    string
	OK       bool
}

// NamedChart is a chart with its caption.
type NamedChart struct {
	Name  string
	Chart *render.Chart
}

// SnapshotRow compares a node's snapshot in proactive mode with on-demand.
type SnapshotRow struct {
	Node                             string
	ProClusters, ProBytes            int
	OnClusters, OnBytes              int
	ScanClusters, ScanBytes, Pending int
	ClusterRatio, ByteRatio          float64
	HasScan                          bool
}

// RedelRow sums the guard's re-deletions after one kube-proxy restart.
type RedelRow struct {
	Node              string
	Services          int
	P50, Max          time.Duration
	AfterDeleteMax    time.Duration
	AfterDeleteMedian time.Duration
}

// NewReport prepares rec for the templates.
func NewReport(rec *Record, took time.Duration) *Report {
	rp := &Report{Record: rec, Status: "FAIL", Took: took}
	if rec.Verdict != nil && rec.Verdict.Pass {
		rp.Status = "PASS"
	}
	if rec.Verdict != nil {
		for i, im := range rec.Verdict.Impacts {
			w := rec.Windows[i]
			row := FaultRow{N: i + 1, Name: im.Window, At: w.Start.Sub(rec.LoadStart).Seconds(), Seconds: im.Seconds, Cuts: im.Cuts,
				Notes: strings.Join(im.Notes, "; "), OK: im.Disallowed == 0 && im.Error == ""}
			var fs []string
			for _, k := range sortedKeys(im.Failures) {
				fs = append(fs, fmt.Sprintf("%d %s", im.Failures[k], k))
			}
			row.Failures = strings.Join(fs, ", ")
			if row.Failures == "" {
				row.Failures = "0"
			}
			var rs []string
			for _, k := range sortedKeys(im.Refused) {
				rs = append(rs, fmt.Sprintf("%d %s", im.Refused[k], k))
			}
			row.Refused = strings.Join(rs, ", ")
			switch {
			case w.Skipped:
				row.Verdict = "skipped"
				rp.Skipped = append(rp.Skipped, im.Window)
			case im.Error != "":
				row.Verdict = "fault failed: " + im.Error
			case im.Disallowed > 0:
				row.Verdict = fmt.Sprintf("%d not allowed", im.Disallowed)
			default:
				row.Verdict = "ok"
			}
			rp.Faults = append(rp.Faults, row)
		}
	}
	if rec.Verdict != nil {
		for _, sp := range rec.Verdict.Stalls {
			d := sp.End.Sub(sp.Start)
			rp.Stalled.N++
			rp.Stalled.Total += d
			rp.Stalled.Longest = max(rp.Stalled.Longest, d)
		}
		idx := map[[4]string]int{}
		for _, a := range rec.Verdict.Failures {
			if !a.Allowed {
				rp.Disallowed = append(rp.Disallowed, a)
				continue
			}
			k := [4]string{a.Window, a.Client, a.Event.Target, a.Event.Err}
			i, ok := idx[k]
			if !ok {
				i = len(rp.Allowed)
				idx[k] = i
				rp.Allowed = append(rp.Allowed, AllowedRow{Window: k[0], Client: k[1], Target: k[2], Class: k[3], First: a.Event.Time, Why: a.Why})
			}
			row := &rp.Allowed[i]
			row.N++
			if a.Event.Time.Before(row.First) {
				row.First = a.Event.Time
			}
			if a.Event.Time.After(row.Last) {
				row.Last = a.Event.Time
			}
		}
	}
	for _, c := range rec.Clients {
		if ch := clientChart(rec, c); ch != nil {
			rp.Charts = append(rp.Charts, NamedChart{Name: c.Pod + " on " + c.Node, Chart: ch})
		}
	}
	rp.RSS = rssChart(rec)
	rp.Snapshot = snapshotRows(rec)
	rp.Redel = redelRows(rec)
	return rp
}

func snapshotRows(rec *Record) []SnapshotRow {
	var out []SnapshotRow
	for _, n := range rec.Env.Nodes {
		row := SnapshotRow{Node: n}
		for _, s := range rec.Figures.Snapshots {
			if s.Node != n {
				continue
			}
			switch s.When {
			case "setup, proactive":
				row.ProClusters, row.ProBytes = s.SvcClusters, s.CDSBytes+s.EDSBytes
			case "end":
				row.OnClusters, row.OnBytes = s.SvcClusters, s.CDSBytes+s.EDSBytes
			case "after scan":
				row.HasScan = true
				row.ScanClusters, row.ScanBytes, row.Pending = s.SvcClusters, s.CDSBytes+s.EDSBytes, s.Pending
			}
		}
		if row.ProClusters > 0 {
			row.ClusterRatio = float64(row.OnClusters) / float64(row.ProClusters)
		}
		if row.ProBytes > 0 {
			row.ByteRatio = float64(row.OnBytes) / float64(row.ProBytes)
		}
		out = append(out, row)
	}
	return out
}

func redelRows(rec *Record) []RedelRow {
	by := map[string][]Redeletion{}
	var nodes []string
	for _, d := range rec.Figures.Redeletions {
		if _, ok := by[d.Node]; !ok {
			nodes = append(nodes, d.Node)
		}
		by[d.Node] = append(by[d.Node], d)
	}
	var out []RedelRow
	for _, n := range nodes {
		ds := by[n]
		var lat, after []float64
		for _, d := range ds {
			lat = append(lat, float64(d.Latency))
			after = append(after, float64(d.AfterDelete))
		}
		out = append(out, RedelRow{Node: n, Services: len(ds), P50: time.Duration(Percentile(lat, 50)), Max: time.Duration(Percentile(lat, 100)),
			AfterDeleteMedian: time.Duration(Percentile(after, 50)), AfterDeleteMax: time.Duration(Percentile(after, 100))})
	}
	return out
}

var funcs = map[string]any{
	"secs": func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) },
	"ms":   func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) },
	"f1":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"f2":   func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"pct":  func(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) },
	"kib":  func(n int) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) },
	"mib":  func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) },
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.Format("15:04:05.000")
	},
	"since": func(t, base time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return fmt.Sprintf("%.1f s", t.Sub(base).Seconds())
	},
	"classes": func(m map[string]int) string {
		var out []string
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%d %s", m[k], k))
		}
		if len(out) == 0 {
			return "0"
		}
		return strings.Join(out, ", ")
	},
	"ratio": func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	},
	"i2f": func(n int64) float64 { return float64(n) },
	"gib": func(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) },
}

// page is the soak's report.md and report.html.
var page = render.MustPage(mdTemplate, htmlTemplate, funcs)

// Write writes soak.json, report.md and report.html into dir.
func Write(dir string, rec *Record, took time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("soak.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), b, 0o644); err != nil {
		return err
	}
	return page.WriteFiles(dir, NewReport(rec, took))
}
