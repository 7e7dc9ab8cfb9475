// Chart geometry: the shapes of the leg cards' charts (render.Chart).

package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/fixtures/evidence"
)

// Every chart is as wide as one side of a leg card; labels take the left part.
const (
	chartW = 520
	labelW = 230
)

const (
	colorReply   = "#5cb85c"
	colorClosed  = "#f0ad4e"
	colorRefused = "#d9534f"
	colorTimeout = "#777777"
	colorOther   = "#9b59b6"
	colorPhase   = "#337ab7"
	colorRule    = "#eeeeee"
	colorStage   = "#999999"
)

// barChart draws one horizontal bar per label, scaled to scale so that two
// charts drawn with the same scale compare at a glance.
func barChart(labels []string, values []float64, scale float64, color, unit string) *render.Chart {
	const rowH, barH, barW = 18, 12, 250
	if scale <= 0 {
		scale = 1
	}
	c := &render.Chart{W: chartW, H: rowH*len(labels) + 4}
	for i, l := range labels {
		y := i*rowH + 3
		w := int(float64(barW) * values[i] / scale)
		c.Rects = append(c.Rects, render.Rect{X: labelW, Y: y, W: w, H: barH, Color: color, Title: fmt.Sprintf("%s: %g%s", l, values[i], unit)})
		c.Texts = append(c.Texts,
			render.Text{X: labelW - 6, Y: y + barH - 2, S: trim(l, 34), End: true},
			render.Text{X: labelW + w + 4, Y: y + barH - 2, S: fmt.Sprintf("%g", values[i])})
	}
	return c
}

// backendChart is a run's replies per backend over the labels of both runs
// of its leg, so red and green show the same rows on the same scale.
func backendChart(r *evidence.Run, labels []string, scale float64) *render.Chart {
	if r == nil || len(labels) == 0 {
		return nil
	}
	values := make([]float64, len(labels))
	for i, l := range labels {
		values[i] = float64(r.Backends[l])
	}
	return barChart(labels, values, scale, colorReply, " replies")
}

func phaseChart(ph []evidence.Phase) *render.Chart {
	if len(ph) == 0 {
		return nil
	}
	labels := make([]string, len(ph))
	values := make([]float64, len(ph))
	scale := 0.0
	for i, p := range ph {
		labels[i] = fmt.Sprintf("%d %s", i+1, p.Name)
		values[i] = float64(int(p.Seconds*10)) / 10
		scale = max(scale, values[i])
	}
	return barChart(labels, values, scale, colorPhase, " s")
}

var outcomes = []struct {
	name, color string
	count       func(*evidence.Run) int
}{
	{"replies", colorReply, func(r *evidence.Run) int { return r.Replies }},
	{"proxy-closed", colorClosed, func(r *evidence.Run) int { return r.ProxyClosed }},
	{"ECONNREFUSED", colorRefused, func(r *evidence.Run) int { return r.HostRefused }},
	{"timeouts", colorTimeout, func(r *evidence.Run) int { return r.Timeouts }},
	{"other errors", colorOther, func(r *evidence.Run) int { return r.OtherErrors }},
}

// outcomeChart is one bar split by what the run's attempts got, with the
// counts in its legend: red and green differ here first.
func outcomeChart(r *evidence.Run) *render.Chart {
	if r == nil || r.Attempts == 0 {
		return nil
	}
	const barW, barH = chartW - 20, 16
	total := r.Attempts
	sum := 0
	for _, o := range outcomes {
		sum += o.count(r)
	}
	total = max(total, sum)
	c := &render.Chart{W: chartW, H: barH + 26, Rects: []render.Rect{{W: barW, H: barH, Color: colorRule, Title: fmt.Sprintf("%d tries", r.Attempts)}}}
	x, lx := 0, 0
	for _, o := range outcomes {
		n := o.count(r)
		if n == 0 {
			continue
		}
		w := barW * n / total
		label := fmt.Sprintf("%s %d", o.name, n)
		c.Rects = append(c.Rects,
			render.Rect{X: x, W: w, H: barH, Color: o.color, Title: fmt.Sprintf("%s: %d of %d tries", o.name, n, r.Attempts)},
			render.Rect{X: lx, Y: barH + 8, W: 10, H: 10, Color: o.color})
		c.Texts = append(c.Texts, render.Text{X: lx + 14, Y: barH + 17, S: label})
		x += w
		lx += 14 + 7*len(label) + 12
	}
	return c
}

// timelineRows are the rows of a leg's timelines: every backend that
// replied in either run, then the outcomes without a backend.
func timelineRows(runs ...*evidence.Run) []string {
	set := map[string]bool{}
	for _, r := range runs {
		if r == nil {
			continue
		}
		for _, s := range r.Timeline {
			set[rowKey(s)] = true
		}
	}
	rows := sortedKeys(set)
	slices.SortStableFunc(rows, func(a, b string) int {
		return boolRank(strings.HasPrefix(a, "(")) - boolRank(strings.HasPrefix(b, "("))
	})
	return rows
}

func rowKey(s evidence.Sample) string {
	if s.Backend != "" {
		return s.Backend
	}
	return "(" + s.Outcome + ")"
}

var stateColor = map[string]string{"ready": colorReply, "terminating": colorClosed}

// timelineChart draws one dot per connection: x = time since the run
// started (both runs of a leg share end), y = backend or outcome, color =
// the backend's state then; dashed lines mark stage changes.
func timelineChart(r *evidence.Run, rows []string, end time.Duration) *render.Chart {
	if r == nil || len(r.Timeline) == 0 {
		return nil
	}
	const rowH, plotW, top = 18, chartW - labelW - 20, 6
	if end <= 0 {
		end = time.Second
	}
	plotB := top + rowH*len(rows)
	c := &render.Chart{W: chartW, H: plotB + 42}
	x := func(d time.Duration) int { return labelW + int(float64(plotW)*float64(d)/float64(end)) }
	row := map[string]int{}
	for i, name := range rows {
		row[name] = top + i*rowH + rowH/2
		c.Texts = append(c.Texts, render.Text{X: labelW - 6, Y: row[name] + 4, S: trim(name, 34), End: true})
		c.Lines = append(c.Lines, render.Line{X1: labelW, Y1: row[name], X2: labelW + plotW, Y2: row[name], Color: colorRule})
	}
	stage, n := "", 0
	for _, s := range r.Timeline {
		if s.Stage != stage {
			stage = s.Stage
			// Alternate two label lines so that close stages do not overlap.
			ly := plotB + 12 + 12*(n%2)
			lx, pastMiddle := x(s.At), x(s.At) > labelW+plotW/2
			c.Lines = append(c.Lines, render.Line{X1: lx, Y1: 2, X2: lx, Y2: ly + 2, Color: colorStage, Dashed: true})
			if pastMiddle {
				lx -= 4
			} else {
				lx += 3
			}
			c.Texts = append(c.Texts, render.Text{X: lx, Y: ly, S: trim(stage, 30), End: pastMiddle, Muted: true})
			n++
		}
		color, ok := stateColor[s.BackendState]
		if !ok {
			color = colorRefused
		}
		c.Circles = append(c.Circles, render.Circle{X: x(s.At), Y: row[rowKey(s)], Color: color,
			Title: fmt.Sprintf("%s %s %s %s", s.At.Round(time.Millisecond), s.Backend, s.BackendState, s.Outcome)})
	}
	c.Texts = append(c.Texts,
		render.Text{X: labelW, Y: c.H - 2, S: "0", Muted: true},
		render.Text{X: labelW + plotW, Y: c.H - 2, S: end.Round(100 * time.Millisecond).String(), End: true, Muted: true})
	return c
}

// timelineEnd is the latest sample of the runs: their common time scale.
func timelineEnd(runs ...*evidence.Run) time.Duration {
	var end time.Duration
	for _, r := range runs {
		if r == nil {
			continue
		}
		for _, s := range r.Timeline {
			end = max(end, s.At)
		}
	}
	return end
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
