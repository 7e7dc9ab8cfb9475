package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

// Input is what a report is made of.
type Input struct {
	Evidence *evidence.Set
	// Ginkgo is the suite's JSON report; nil when the suite never ran (for
	// example the cluster could not be created).
	Ginkgo []types.Report
	// Failure is a note from the caller, e.g. the exit status of a make step.
	Failure string
}

// row is one leg as the report shows it.
type row struct {
	Name     string
	Verdict  evidence.Verdict
	Reason   string
	Red      string
	Green    string
	Duration time.Duration
	Evidence string
	Leg      *evidence.Leg // nil when only Ginkgo knows the leg
}

// Passed reports whether every leg that ran passed and the suite itself did
// not fail outside the legs.
func (in Input) Passed() bool {
	rows := in.rows()
	if len(rows) == 0 || len(in.failures()) > 0 || len(in.suiteFailures()) > 0 {
		return false
	}
	for _, r := range rows {
		if r.Verdict.Failed() {
			return false
		}
	}
	return true
}

func (in Input) rows() []row {
	var out []row
	seen := map[string]bool{}
	if in.Evidence != nil {
		for _, l := range in.Evidence.Legs {
			seen[l.Name] = true
			out = append(out, row{
				Name: l.Name, Verdict: l.Verdict, Reason: l.Reason,
				Red: runCell(l.Red), Green: runCell(l.Green),
				Duration: l.Duration, Evidence: evidenceCell(l), Leg: l,
			})
		}
	}
	// A leg spec that failed before it wrote evidence still gets a row.
	for _, s := range in.specs() {
		name := legOf(s)
		if name == "" || seen[name] || s.State.Is(types.SpecStateSkipped|types.SpecStatePending) {
			continue
		}
		seen[name] = true
		reason := s.State.String()
		if s.Failure.Message != "" {
			reason += ": " + firstLine(s.Failure.Message)
		}
		out = append(out, row{Name: name, Verdict: evidence.Incomplete, Reason: reason,
			Red: "—", Green: "—", Duration: s.RunTime})
	}
	return out
}

// failures are the failures outside the suite: the caller's and the
// evidence's (setup).
func (in Input) failures() []string {
	var out []string
	if in.Failure != "" {
		out = append(out, in.Failure)
	}
	if in.Evidence != nil && in.Evidence.Failure != "" {
		out = append(out, in.Evidence.Failure)
	}
	return out
}

func (in Input) specs() []types.SpecReport {
	var out []types.SpecReport
	for _, r := range in.Ginkgo {
		out = append(out, r.SpecReports...)
	}
	return out
}

// suiteFailures are failed nodes that are not legs: BeforeSuite, AfterSuite,
// reporters, and specs without a leg label (the programming figure).
func (in Input) suiteFailures() []string {
	var out []string
	for _, s := range in.specs() {
		if !s.State.Is(types.SpecStateFailureStates) || (s.LeafNodeType == types.NodeTypeIt && legOf(s) != "") {
			continue
		}
		what := s.LeafNodeType.String()
		if s.LeafNodeType == types.NodeTypeIt {
			what = s.FullText()
		}
		out = append(out, fmt.Sprintf("%s: %s", what, firstLine(s.Failure.Message)))
	}
	return out
}

// legOf returns the leg label of a spec: the first of its labels that names a leg.
func legOf(s types.SpecReport) string {
	for _, l := range s.Labels() {
		for _, n := range evidence.LegOrder {
			if l == n {
				return l
			}
		}
	}
	return ""
}

func runCell(r *evidence.Run) string {
	if r == nil {
		return "not run"
	}
	if r.Error != "" {
		return "error: " + r.Error
	}
	mark := "✗"
	switch {
	case r.Mode == evidence.Red && r.MetRed && r.MetGreen:
		mark = "✓ unchanged (control leg)"
	case r.Mode == evidence.Red && r.MetRed && !r.MetGreen:
		mark = "✓ red"
	case r.Mode == evidence.Green && r.MetGreen:
		mark = "✓ green"
	case r.Mode == evidence.Red && r.MetGreen:
		mark = "✗ green"
	}
	return fmt.Sprintf("%s (%s): %s", mark, r.Duration.Round(100*time.Millisecond), r.Summary)
}

func evidenceCell(l *evidence.Leg) string {
	var parts []string
	for _, r := range []*evidence.Run{l.Red, l.Green} {
		if r == nil {
			continue
		}
		var p []string
		if r.Attempts > 0 {
			p = append(p, fmt.Sprintf("%d tries: %d replies, %d proxy-closed, %d ECONNREFUSED, %d timeouts",
				r.Attempts, r.Replies, r.ProxyClosed, r.HostRefused, r.Timeouts))
		}
		if len(r.Backends) > 0 {
			p = append(p, "backends "+FormatCounts(r.Backends))
		}
		for _, k := range sortedKeys(r.Counters) {
			p = append(p, fmt.Sprintf("%s %+g", k, r.Counters[k]))
		}
		p = append(p, r.Notes...)
		if len(p) > 0 {
			parts = append(parts, string(r.Mode)+": "+strings.Join(p, "; "))
		}
	}
	return strings.Join(parts, " — ")
}

// FormatCounts prints a distribution as "a=3 b=2", sorted by name.
func FormatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (in Input) env() evidence.Env {
	if in.Evidence != nil && in.Evidence.Env != nil {
		return *in.Evidence.Env
	}
	return evidence.Env{}
}

var envHeader = []string{"node proxy", "Kubernetes", "kind", "Envoy", "kube-proxy mode", "nodes"}

// envCells are the values under envHeader, unescaped.
func envCells(env evidence.Env) []string {
	var nodes []string
	for _, n := range env.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s (%s)", n.Name, orDash(n.Zone)))
	}
	proxy := orDash(env.Proxy)
	if env.ProxyChoice != "" {
		proxy += " — " + env.ProxyChoice
	}
	return []string{proxy, orDash(env.KubernetesVersion), orDash(env.KindVersion), orDash(env.EnvoyVersion),
		orDash(env.KubeProxyMode), orDash(strings.Join(nodes, ", "))}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func (in Input) phases() []evidence.Phase {
	if in.Evidence == nil {
		return nil
	}
	return in.Evidence.Phases
}

// programmingHeader and programmingRows are the network-programming table
// both reports print, built once so the two cannot drift apart.
var programmingHeader = []string{"component", "metric", "samples", "p50", "p99"}

// programmingMetricCol is the column each renderer shows as code.
const programmingMetricCol = 1

// programmingTitle is the table's heading.
func programmingTitle(p *evidence.Programming) string {
	return fmt.Sprintf("Network programming latency (%d EndpointSlice changes, same run)", p.Changes)
}

// programmingRows are the cells under programmingHeader, unescaped: the agent,
// then kube-proxy.
func programmingRows(p *evidence.Programming) [][]string {
	var rows [][]string
	for _, c := range []struct {
		name string
		q    evidence.Quantiles
	}{{"svclb agent", p.Agent}, {"kube-proxy", p.KubeProxy}} {
		rows = append(rows, []string{c.name, c.q.Metric, fmt.Sprintf("%.0f", c.q.Count), secs(c.q.P50, c.q.Count), secs(c.q.P99, c.q.Count)})
	}
	return rows
}

func secs(v, count float64) string {
	if count == 0 {
		return "—"
	}
	if v >= 1 {
		return fmt.Sprintf("%.2f s", v)
	}
	return fmt.Sprintf("%.0f ms", v*1000)
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return d.Round(100 * time.Millisecond).String()
}
