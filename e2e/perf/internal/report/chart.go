// Charts: the latency distributions (render.Chart).

package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
)

const (
	colorAgent     = "#1f6feb"
	colorKubeProxy = "#d4761c"
	// colorKubeProxyAll: kube-proxy with the changes its failed syncs stalled.
	colorKubeProxyAll = "#e8b98a"
	colorRule         = "#e1e4e8"
)

// series is one distribution to draw.
type series struct {
	name    string
	color   string
	samples []float64 // ms, sorted
}

// cdfChart draws the empirical distribution of each series: x is the
// latency on a log scale (1 ms up to the next power of ten above the
// largest; samples below 1 ms are drawn at 1 ms), y the share of changes
// that took at most that long. The agent's and kube-proxy's sit a decade
// or more apart, which a linear axis would squash.
func cdfChart(ss ...series) *render.Chart {
	const w, h, left, right, top, bottom = 560, 230, 44, 16, 10, 46
	maxV := 1.0
	for _, s := range ss {
		if n := len(s.samples); n > 0 {
			maxV = math.Max(maxV, s.samples[n-1])
		}
	}
	decades := int(math.Ceil(math.Log10(maxV)))
	if decades < 1 {
		decades = 1
	}
	plotW, plotH := w-left-right, h-top-bottom
	x := func(ms float64) int {
		return left + int(float64(plotW)*math.Log10(math.Max(ms, 1))/float64(decades))
	}
	y := func(frac float64) int { return top + plotH - int(float64(plotH)*frac) }
	c := &render.Chart{W: w, H: h}
	for d := 0; d <= decades; d++ {
		xd := left + plotW*d/decades
		c.Lines = append(c.Lines, render.Line{X1: xd, Y1: top, X2: xd, Y2: top + plotH, Color: colorRule})
		c.Texts = append(c.Texts, render.Text{X: xd, Y: top + plotH + 14, S: msLabel(math.Pow(10, float64(d))), Color: render.MutedColor})
	}
	for _, f := range []float64{0, 0.5, 0.9, 0.99, 1} {
		c.Lines = append(c.Lines, render.Line{X1: left, Y1: y(f), X2: left + plotW, Y2: y(f), Color: colorRule})
		c.Texts = append(c.Texts, render.Text{X: left - 4, Y: y(f) + 4, S: fmt.Sprintf("p%g", f*100), End: true, Color: render.MutedColor})
	}
	lx := left
	for _, s := range ss {
		if len(s.samples) == 0 {
			continue
		}
		var pts []string
		prev := y(0)
		for i, v := range s.samples {
			xi, yi := x(v), y(float64(i+1)/float64(len(s.samples)))
			pts = append(pts, fmt.Sprintf("%d,%d %d,%d", xi, prev, xi, yi))
			prev = yi
		}
		pts = append(pts, fmt.Sprintf("%d,%d", left+plotW, prev))
		c.Polylines = append(c.Polylines, render.Polyline{Points: strings.Join(pts, " "), Color: s.color, Width: 2,
			Title: fmt.Sprintf("%s: %d samples, %s … %s", s.name, len(s.samples), msLabel(s.samples[0]), msLabel(s.samples[len(s.samples)-1]))})
		label := fmt.Sprintf("%s (n=%d)", s.name, len(s.samples))
		c.Lines = append(c.Lines, render.Line{X1: lx, Y1: h - 10, X2: lx + 18, Y2: h - 10, Color: s.color})
		c.Texts = append(c.Texts, render.Text{X: lx + 22, Y: h - 6, S: label})
		lx += 22 + 7*len(label) + 16
	}
	return c
}

// msLabel prints milliseconds the way a reader scans them.
func msLabel(ms float64) string {
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%gs", math.Round(ms/100)/10)
	case ms >= 10 || ms <= -10:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return fmt.Sprintf("%.1fms", ms)
	}
}
