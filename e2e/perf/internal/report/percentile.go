// The percentile chart: latency by percentile on a "nines" axis, where the
// tail a CDF squashes into its top edge gets as much width as the median.

package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/e2e/perf/internal/connload"
)

// pathSeries is one path's latency curve.
type pathSeries struct {
	name, color string
	l           connload.Latency
}

// maxNines is the axis' right end: p99.99.
const maxNines = 4

// nines is where quantile q sits on the axis: -log10(1-q), so p90 is 1,
// p99 2, p99.9 3; the maximum of n samples sits where the nearest rank puts
// it, at 1-1/n.
func nines(q float64, n int) float64 {
	if q >= 1 {
		q = 1 - 1/float64(max(n, 1))
	}
	return math.Min(-math.Log10(1-q), maxNines)
}

// percentileChart draws each series' curve: x the percentile in nines, y the
// latency on a log scale from the decade below the smallest point to the
// one above the largest.
func percentileChart(ss ...pathSeries) *render.Chart {
	const w, h, left, right, top, bottom = 560, 250, 52, 16, 10, 66
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.l.Curve {
			if p.Ms > 0 {
				lo, hi = math.Min(lo, p.Ms), math.Max(hi, p.Ms)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	plotW, plotH := w-left-right, h-top-bottom
	x := func(n float64) int { return left + int(float64(plotW)*n/maxNines) }
	y := func(ms float64) int {
		v := (math.Log10(math.Max(ms, lo)) - d0) / (d1 - d0)
		return top + plotH - int(float64(plotH)*v)
	}
	c := &render.Chart{W: w, H: h}
	for n := 0; n <= maxNines; n++ {
		c.Lines = append(c.Lines, render.Line{X1: x(float64(n)), Y1: top, X2: x(float64(n)), Y2: top + plotH, Color: colorRule})
		c.Texts = append(c.Texts, render.Text{X: x(float64(n)), Y: top + plotH + 14, S: ninesLabel(n), Color: render.MutedColor})
	}
	for d := d0; d <= d1; d++ {
		v := math.Pow(10, d)
		c.Lines = append(c.Lines, render.Line{X1: left, Y1: y(v), X2: left + plotW, Y2: y(v), Color: colorRule})
		c.Texts = append(c.Texts, render.Text{X: left - 4, Y: y(v) + 4, S: decadeLabel(v), End: true, Color: render.MutedColor})
	}
	lx, ly := left, h-34
	for _, s := range ss {
		if len(s.l.Curve) == 0 {
			continue
		}
		var pts []string
		for _, p := range s.l.Curve {
			pts = append(pts, fmt.Sprintf("%d,%d", x(nines(p.Q, s.l.N)), y(p.Ms)))
		}
		c.Polylines = append(c.Polylines, render.Polyline{Points: strings.Join(pts, " "), Color: s.color, Width: 2,
			Title: fmt.Sprintf("%s: n=%d, p50 %s, p99 %s, p99.9 %s, max %s", s.name, s.l.N, msLabel(s.l.P50), msLabel(s.l.P99), msLabel(s.l.P999), msLabel(s.l.Max))})
		label := s.name
		if lx+22+7*len(label) > w {
			lx, ly = left, ly+16
		}
		c.Lines = append(c.Lines, render.Line{X1: lx, Y1: ly - 4, X2: lx + 18, Y2: ly - 4, Color: s.color})
		c.Texts = append(c.Texts, render.Text{X: lx + 22, Y: ly, S: label})
		lx += 22 + 7*len(label) + 16
	}
	return c
}

func ninesLabel(n int) string {
	switch n {
	case 0:
		return "p0"
	case 1:
		return "p90"
	case 2:
		return "p99"
	}
	return "p99." + strings.Repeat("9", n-2)
}

// decadeLabel is a power of ten of milliseconds (msLabel rounds below 10 ms).
func decadeLabel(ms float64) string {
	if ms < 10 {
		return fmt.Sprintf("%gms", ms)
	}
	return msLabel(ms)
}
