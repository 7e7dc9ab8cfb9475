package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/evidence"
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
// the counts, the backends, kube-proxy's cut, the attempts per client node,
// the counters per node against this run's requirement, the refusal
// records, the metric deltas, the notes.
func evidenceParts(r *evidence.Run, s Side) []string {
	var p []string
	if r.Attempts > 0 {
		p = append(p, fmt.Sprintf("%d tries: %d replies, %d proxy-closed, %d ECONNREFUSED, %d timeouts",
			r.Attempts, r.Replies, r.ProxyClosed, r.HostRefused, r.Timeouts))
	}
	if len(r.Backends) > 0 {
		p = append(p, "backends "+formatCounts(r.Backends))
	}
	if s.Cut != "" {
		p = append(p, "kube-proxy cut "+s.Cut)
	}
	p = append(p, s.Clients...)
	p = append(p, s.Checks...)
	p = append(p, s.Refusals...)
	for _, k := range sortedKeys(r.Counters) {
		p = append(p, fmt.Sprintf("%s %+g", k, r.Counters[k]))
	}
	return append(p, r.Notes...)
}

// cutText is a run's hold on the leg's cut Services: "✓ …" or "✗ why";
// "" when the leg dials none.
func cutText(r *evidence.Run) string {
	if len(r.Cuts) == 0 {
		return ""
	}
	if ok, why := r.CutHeld(); !ok {
		return "✗ " + why
	}
	var svcs, restores []string
	nodes := 0
	for _, c := range r.Cuts {
		svcs = append(svcs, c.Service)
		nodes = max(nodes, len(c.Before))
		if s := c.Restores(); s != "" {
			restores = append(restores, s)
		}
	}
	out := fmt.Sprintf("✓ %s: no kube-proxy ClusterIP entry on any of %d nodes before or after the run", strings.Join(svcs, ", "), nodes)
	if len(restores) > 0 {
		out += "; " + strings.Join(restores, "; ")
	}
	return out
}

// legCut is the leg's cut column: each run's mark, "—" when neither has
// cut Services.
func legCut(red, green *evidence.Run) string {
	mark := func(r *evidence.Run) string {
		switch {
		case r == nil || len(r.Cuts) == 0:
			return "—"
		case func() bool { ok, _ := r.CutHeld(); return ok }():
			return "✓"
		}
		return "✗"
	}
	if (red == nil || len(red.Cuts) == 0) && (green == nil || len(green.Cuts) == 0) {
		return "—"
	}
	return "cut during red " + mark(red) + " / green " + mark(green)
}

// clientLines are the run's attempts per client node (and destination,
// when it dialled several), with the backends that replied.
func clientLines(r *evidence.Run, zone func(string) string) []string {
	tos := map[string]bool{}
	for _, f := range r.Flows {
		tos[f.To] = true
	}
	var out []string
	for _, f := range r.Flows {
		who := "client on " + orDash(f.Node)
		if z := zone(f.Node); z != "" {
			who += " (" + z + ")"
		}
		if len(tos) > 1 {
			who += " → " + f.To
		}
		line := who + ": " + f.Counts()
		if len(f.Backends) > 0 {
			line += "; from " + formatCounts(f.Backends)
		}
		out = append(out, line)
	}
	return out
}

// checkLines are the run's checks against its own mode's requirement, one
// line per node ("cluster" for checks of no node), and how many hold.
func checkLines(r *evidence.Run) (lines []string, ok, all int) {
	byNode := map[string][]string{}
	var nodes []string
	for _, c := range r.Checks {
		w := c.Want(r.Mode)
		mark := "✓"
		if !c.Holds(r.Mode) {
			mark = "✗"
		} else if w.Op == "" {
			mark = ""
		}
		if w.Op != "" {
			all++
			if c.Holds(r.Mode) {
				ok++
			}
		}
		n := c.Node
		if n == "" {
			n = "cluster"
		}
		if _, seen := byNode[n]; !seen {
			nodes = append(nodes, n)
		}
		byNode[n] = append(byNode[n], strings.TrimSpace(fmt.Sprintf("%s +%s (%s %s)", c.What, trimFloat(c.Got), w, mark)))
	}
	for _, n := range nodes {
		lines = append(lines, n+": "+strings.Join(byNode[n], ", "))
	}
	return lines, ok, all
}

// refusalLines show the agent's record of one refused connection per
// target the leg expects refused.
func refusalLines(r *evidence.Run) []string {
	var out []string
	for _, f := range r.Refusals {
		svc := "(no Service)"
		if f.Service != "" {
			svc = f.Namespace + "/" + f.Service
		}
		out = append(out, fmt.Sprintf("refusal record on %s: reason=%s service=%s destination=%s source=%s flag=%s cluster=%s",
			f.Node, f.Reason, svc, f.Destination, orDash(f.Source), orDash(f.Flag), orDash(f.Cluster)))
	}
	return out
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

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

// ms prints a figure's milliseconds ("—" without samples).
func ms(v float64, count int) string {
	if count == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f ms", v)
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
