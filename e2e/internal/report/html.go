package report

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
)

const css = `body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:14px}
th{background:#f4f4f4}.pass{color:#116611;font-weight:bold}.fail{color:#aa1111;font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:1.5em}figure{margin:0}figcaption{font-size:13px;color:#555}`

// HTML writes report.html: the tables of the Markdown report and inline SVG
// charts (backend distribution per leg, drain timeline, phase wall time).
func HTML(w io.Writer, in Input) error {
	b := bufio.NewWriter(w)
	esc := html.EscapeString
	status, class := "FAILED", "fail"
	if in.Passed() {
		status, class = "PASSED", "pass"
	}
	fmt.Fprintf(b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>svclb e2e: %s</title><style>%s</style></head><body>\n", status, css)
	fmt.Fprintf(b, "<h1>svclb acceptance legs: <span class=%q>%s</span></h1>\n", class, status)
	fmt.Fprintf(b, "<p>A leg passes only if it is red with the agent's Phase flags off and green with them on; green in both runs proves nothing and fails.</p>\n")
	vals := envCells(in.env())
	for i := range vals {
		vals[i] = esc(vals[i])
	}
	fmt.Fprintf(b, "<table><tr><th>%s</th></tr><tr><td>%s</td></tr></table>\n", strings.Join(envHeader, "</th><th>"), strings.Join(vals, "</td><td>"))
	for _, f := range in.failures() {
		fmt.Fprintf(b, "<p class=\"fail\">Run failure: %s</p>\n", esc(f))
	}
	for _, f := range in.suiteFailures() {
		fmt.Fprintf(b, "<p class=\"fail\">Suite failure: %s</p>\n", esc(f))
	}

	rows := in.rows()
	fmt.Fprintf(b, "<h2>Legs</h2>\n")
	if len(rows) == 0 {
		fmt.Fprintf(b, "<p>No leg ran.</p>\n")
	} else {
		fmt.Fprintf(b, "<table><tr><th>leg</th><th>verdict</th><th>red (agent off)</th><th>green (agent on)</th><th>duration</th><th>evidence</th></tr>\n")
		for _, r := range rows {
			c := "pass"
			if r.Verdict.Failed() {
				c = "fail"
			}
			fmt.Fprintf(b, "<tr><td>%s</td><td class=%q>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(r.Name), c, esc(verdictCell(r)), esc(r.Red), esc(r.Green), esc(fmtDur(r.Duration)), esc(r.Evidence))
		}
		fmt.Fprintf(b, "</table>\n<ul>\n")
		for _, r := range rows {
			if r.Leg != nil {
				fmt.Fprintf(b, "<li><b>%s</b> — setup: %s; red: %s; green: %s</li>\n", esc(r.Name), esc(r.Leg.Setup), esc(r.Leg.RedExpect), esc(r.Leg.GreenMeans))
			}
		}
		fmt.Fprintf(b, "</ul>\n")
	}

	var charts []string
	for _, r := range rows {
		if r.Leg == nil {
			continue
		}
		if svg := distributionSVG(r.Leg); svg != "" {
			charts = append(charts, figure(svg, "backend distribution: "+r.Name+" (replies per backend, red vs green)"))
		}
		for _, run := range []*evidence.Run{r.Leg.Red, r.Leg.Green} {
			if run != nil && len(run.Timeline) > 0 {
				charts = append(charts, figure(TimelineSVG(run.Timeline), fmt.Sprintf("timeline: %s, %s run (one dot per connection; color = backend state)", r.Name, run.Mode)))
			}
		}
	}
	if len(charts) > 0 {
		fmt.Fprintf(b, "<h2>Charts</h2>\n<div class=\"charts\">%s</div>\n", strings.Join(charts, "\n"))
	}

	if ph := in.phases(); len(ph) > 0 {
		fmt.Fprintf(b, "<h2>Wall time</h2>\n<table><tr><th>phase</th><th>seconds</th></tr>\n")
		for _, p := range ph {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%.1f</td></tr>\n", esc(p.Name), p.Seconds)
		}
		fmt.Fprintf(b, "</table>\n%s\n", figure(phasesSVG(ph), "wall time per phase (s)"))
	}
	if in.Evidence != nil && in.Evidence.Programming != nil {
		p := in.Evidence.Programming
		fmt.Fprintf(b, "<h2>%s</h2>\n", esc(programmingTitle(p)))
		fmt.Fprintf(b, "<table><tr><th>%s</th></tr>\n", strings.Join(programmingHeader, "</th><th>"))
		for _, r := range programmingRows(p) {
			for i := range r {
				r[i] = esc(r[i])
			}
			r[programmingMetricCol] = "<code>" + r[programmingMetricCol] + "</code>"
			fmt.Fprintf(b, "<tr><td>%s</td></tr>\n", strings.Join(r, "</td><td>"))
		}
		fmt.Fprintf(b, "</table>\n")
		if p.Note != "" {
			fmt.Fprintf(b, "<p>%s</p>\n", esc(p.Note))
		}
	}
	fmt.Fprintf(b, "</body></html>\n")
	return b.Flush()
}

func figure(svg, caption string) string {
	return fmt.Sprintf("<figure>%s<figcaption>%s</figcaption></figure>", svg, html.EscapeString(caption))
}

// barChart draws horizontal bars: one row per label, one bar per series.
func barChart(labels []string, series []string, colors []string, value func(label string, series int) float64, unit string) string {
	const rowH, barH, labelW, barW = 22, 9, 220, 260
	max := 0.0
	for _, l := range labels {
		for s := range series {
			if v := value(l, s); v > max {
				max = v
			}
		}
	}
	if max == 0 {
		max = 1
	}
	h := rowH*len(labels) + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="11" font-family="sans-serif">`, labelW+barW+60, h)
	for i, l := range labels {
		y := i*rowH + 4
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, labelW-4, y+barH+2, html.EscapeString(trim(l, 34)))
		for s := range series {
			v := value(l, s)
			w := int(float64(barW) * v / max)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s %s: %g%s</title></rect>`,
				labelW, y+s*barH, w, barH-1, colors[s%len(colors)], html.EscapeString(l), series[s], v, unit)
			fmt.Fprintf(&b, `<text x="%d" y="%d">%g</text>`, labelW+w+3, y+s*barH+barH-1, v)
		}
	}
	ly := h - 6
	for s, name := range series {
		x := labelW + s*90
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="8" fill="%s"/><text x="%d" y="%d">%s</text>`, x, ly-8, colors[s%len(colors)], x+13, ly, html.EscapeString(name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func distributionSVG(l *evidence.Leg) string {
	set := map[string]bool{}
	for _, r := range []*evidence.Run{l.Red, l.Green} {
		if r == nil {
			continue
		}
		for k := range r.Backends {
			set[k] = true
		}
	}
	if len(set) == 0 {
		return ""
	}
	labels := sortedKeys(set)
	runs := []*evidence.Run{l.Red, l.Green}
	return barChart(labels, []string{"red", "green"}, []string{"#d9534f", "#5cb85c"}, func(label string, s int) float64 {
		if runs[s] == nil {
			return 0
		}
		return float64(runs[s].Backends[label])
	}, " replies")
}

func phasesSVG(ph []evidence.Phase) string {
	labels := make([]string, len(ph))
	for i, p := range ph {
		labels[i] = fmt.Sprintf("%d %s", i+1, p.Name)
	}
	return barChart(labels, []string{"seconds"}, []string{"#337ab7"}, func(label string, _ int) float64 {
		for i, p := range ph {
			if labels[i] == label {
				return float64(int(p.Seconds*10)) / 10
			}
		}
		return 0
	}, " s")
}

var stateColor = map[string]string{"ready": "#5cb85c", "terminating": "#f0ad4e"}

// TimelineSVG draws one dot per connection: x = time, y = backend (or the
// outcome when no backend replied), color = the backend's state then;
// vertical lines mark stage changes.
func TimelineSVG(tl []evidence.Sample) string {
	const labelW, plotW, rowH = 220, 420, 20
	rowsSet := map[string]bool{}
	var end time.Duration
	for _, s := range tl {
		rowsSet[rowKey(s)] = true
		if s.At > end {
			end = s.At
		}
	}
	if end == 0 {
		end = time.Second
	}
	rows := sortedKeys(rowsSet)
	sort.SliceStable(rows, func(i, j int) bool { return !strings.HasPrefix(rows[i], "(") && strings.HasPrefix(rows[j], "(") })
	idx := map[string]int{}
	for i, r := range rows {
		idx[r] = i
	}
	h := rowH*len(rows) + 40
	x := func(d time.Duration) int { return labelW + int(float64(plotW)*float64(d)/float64(end)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-size="11" font-family="sans-serif">`, labelW+plotW+30, h)
	for i, r := range rows {
		y := i*rowH + 14
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#eee"/>`,
			labelW-4, y+4, html.EscapeString(trim(r, 34)), labelW, labelW+plotW, y, y)
	}
	stage := ""
	for _, s := range tl {
		if s.Stage != stage {
			stage = s.Stage
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="2" y2="%d" stroke="#999" stroke-dasharray="3,3"/><text x="%d" y="%d" fill="#555">%s</text>`,
				x(s.At), x(s.At), h-24, x(s.At)+2, h-12, html.EscapeString(trim(stage, 30)))
		}
		c, ok := stateColor[s.BackendState]
		if !ok {
			c = "#d9534f"
		}
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="3" fill="%s"><title>%s %s %s %s</title></circle>`, x(s.At), idx[rowKey(s)]*rowH+14, c,
			s.At.Round(time.Millisecond), html.EscapeString(s.Backend), s.BackendState, s.Outcome)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">0</text><text x="%d" y="%d" text-anchor="end">%s</text>`, labelW, h-2, labelW+plotW, h-2, end.Round(100*time.Millisecond))
	b.WriteString(`</svg>`)
	return b.String()
}

func rowKey(s evidence.Sample) string {
	if s.Backend != "" {
		return s.Backend
	}
	return "(" + s.Outcome + ")"
}

func trim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
