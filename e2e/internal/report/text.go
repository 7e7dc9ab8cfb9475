package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

// mark is the check a run gets: whether it showed what its mode is for.
// A red run that met the green condition is a control leg's unchanged
// traffic unless the verdict says it proves nothing (only a non-control leg
// can be judged so).
func mark(r *evidence.Run, v evidence.Verdict) (string, bool) {
	switch {
	case r.Mode == evidence.Red && r.MetGreen && v == evidence.ProvesNothing:
		return "✗ green", false
	case r.Mode == evidence.Red && r.MetRed && r.MetGreen:
		return "✓ unchanged (control leg)", true
	case r.Mode == evidence.Red && r.MetRed:
		return "✓ red", true
	case r.Mode == evidence.Green && r.MetGreen:
		return "✓ green", true
	case r.Mode == evidence.Red && r.MetGreen:
		return "✗ green", false
	}
	return "✗", false
}

// evidenceParts are what a run recorded beyond its summary, one item each:
// the counts, the backends, the metric deltas, the notes.
func evidenceParts(r *evidence.Run) []string {
	var p []string
	if r.Attempts > 0 {
		p = append(p, fmt.Sprintf("%d tries: %d replies, %d proxy-closed, %d ECONNREFUSED, %d timeouts",
			r.Attempts, r.Replies, r.ProxyClosed, r.HostRefused, r.Timeouts))
	}
	if len(r.Backends) > 0 {
		p = append(p, "backends "+formatCounts(r.Backends))
	}
	for _, k := range sortedKeys(r.Counters) {
		p = append(p, fmt.Sprintf("%s %+g", k, r.Counters[k]))
	}
	return append(p, r.Notes...)
}

// evidenceLine is report.md's evidence cell: both runs' parts on one line.
func evidenceLine(sides ...Side) string {
	var parts []string
	for _, s := range sides {
		if len(s.Evidence) > 0 {
			parts = append(parts, s.Mode+": "+strings.Join(s.Evidence, "; "))
		}
	}
	return strings.Join(parts, " — ")
}

// formatCounts prints a distribution as "a=3 b=2", sorted by name.
func formatCounts(m map[string]int) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
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

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
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

// trim shortens a chart label to n runes.
func trim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
