// Charts: the timeline of each client and the resident sets (render.Chart).

package soak

import (
	"fmt"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

const (
	chartW    = 1100
	plotL     = 60 // left margin for the y labels
	plotR     = 20
	colorOK   = "#2da44e"
	colorBad  = "#cf222e"
	colorWin  = "#f0ad4e"
	colorBad2 = "#9a6700"
	colorRule = "#d0d7de"
)

// timeAxis maps instants of [start, end] onto the plot's width.
type timeAxis struct {
	start time.Time
	span  time.Duration
}

func (a timeAxis) x(t time.Time) int {
	f := float64(t.Sub(a.start)) / float64(a.span)
	return plotL + int(f*float64(chartW-plotL-plotR))
}

// shade draws every window as a band over [top, bottom], labelled at top
// when label.
func (a timeAxis) shade(c *render.Chart, ws []Window, top, bottom int, label bool) {
	for i, w := range ws {
		x1, x2 := a.x(w.Start), a.x(w.End)
		c.Rects = append(c.Rects, render.Rect{X: x1, Y: top, W: max(2, x2-x1), H: bottom - top, Color: colorWin, Opacity: 0.25,
			Title: fmt.Sprintf("%s: %s → %s (%.1f s)", w.Name, w.Start.Format("15:04:05.0"), w.End.Format("15:04:05.0"), w.End.Sub(w.Start).Seconds())})
		if label {
			c.Texts = append(c.Texts, render.Text{X: x1 + 2, Y: top + 10 + 10*(i%3), S: fmt.Sprint(i + 1), Muted: true})
		}
	}
}

// axis draws the time ticks every 30 s under bottom.
func (a timeAxis) axis(c *render.Chart, bottom int) {
	c.Lines = append(c.Lines, render.Line{X1: plotL, Y1: bottom, X2: chartW - plotR, Y2: bottom, Color: colorRule})
	for d := time.Duration(0); d <= a.span; d += 30 * time.Second {
		x := a.x(a.start.Add(d))
		c.Lines = append(c.Lines, render.Line{X1: x, Y1: bottom, X2: x, Y2: bottom + 4, Color: colorRule})
		c.Texts = append(c.Texts, render.Text{X: x, Y: bottom + 15, S: fmt.Sprintf("%ds", int(d.Seconds())), Muted: true})
	}
}

// clientChart is one client's per-second successes (a line) and failures
// (bars, scaled up so one failure shows), the windows shaded.
func clientChart(r *Record, c Client) *render.Chart {
	a := timeAxis{start: clientStart(c), span: r.LoadEnd.Sub(clientStart(c))}
	if a.span <= 0 {
		return nil
	}
	const top, h = 8, 120
	bottom := top + h
	ok := map[int64]int{}
	bad := map[int64]int{}
	maxOK := 1
	for _, e := range c.Events {
		if e.Kind != echo.LoadSecond || e.Time.Before(a.start) || e.Time.After(r.LoadEnd) {
			continue
		}
		ok[e.Second] += e.OK
		for _, n := range e.Failed {
			bad[e.Second] += n
		}
		maxOK = max(maxOK, ok[e.Second])
	}
	ch := &render.Chart{W: chartW, H: bottom + 22}
	a.shade(ch, r.Windows, top, bottom, true)
	if r.Verdict != nil {
		for _, sp := range r.Verdict.Stalls {
			x1, x2 := a.x(sp.Start), a.x(sp.End)
			ch.Rects = append(ch.Rects, render.Rect{X: x1, Y: top, W: max(2, x2-x1), H: bottom - top, Color: "#6e7781", Opacity: 0.35,
				Title: fmt.Sprintf("machine stall %s → %s (%.1f s)", sp.Start.Format("15:04:05.0"), sp.End.Format("15:04:05.0"), sp.End.Sub(sp.Start).Seconds())})
		}
	}
	y := func(v int) int { return bottom - v*h/maxOK }
	pts := ""
	for s := a.start.Unix(); s <= r.LoadEnd.Unix(); s++ {
		pts += fmt.Sprintf("%d,%d ", a.x(time.Unix(s, 0)), y(ok[s]))
		if n := bad[s]; n > 0 {
			x := a.x(time.Unix(s, 0))
			hh := max(6, n*h/maxOK)
			ch.Rects = append(ch.Rects, render.Rect{X: x, Y: bottom - min(h, hh), W: max(2, a.x(time.Unix(s+1, 0))-x), H: min(h, hh), Color: colorBad,
				Title: fmt.Sprintf("%s: %d failed, %d ok", time.Unix(s, 0).Format("15:04:05"), n, ok[s])})
		}
	}
	ch.Polylines = append(ch.Polylines, render.Polyline{Points: pts, Color: colorOK, Title: "successful connections per second", Width: 1.5})
	ch.Texts = append(ch.Texts, render.Text{X: plotL - 6, Y: top + 8, S: fmt.Sprint(maxOK), End: true, Muted: true},
		render.Text{X: plotL - 6, Y: bottom, S: "0", End: true, Muted: true})
	a.axis(ch, bottom)
	return ch
}

// rssChart is every node's agent and proxy resident set over the load.
func rssChart(r *Record) *render.Chart {
	a := timeAxis{start: r.LoadStart, span: r.LoadEnd.Sub(r.LoadStart)}
	if a.span <= 0 || len(r.Samples) == 0 {
		return nil
	}
	for _, c := range r.Clients {
		if s := clientStart(c); !s.IsZero() && s.Before(a.start) {
			a.start, a.span = s, r.LoadEnd.Sub(s)
		}
	}
	const top, h = 8, 140
	bottom := top + h
	maxMiB := 1.0
	for _, s := range r.Samples {
		maxMiB = max(maxMiB, float64(s.Agent.RSS)/(1<<20), float64(s.Proxy.RSS)/(1<<20))
	}
	ch := &render.Chart{W: chartW, H: bottom + 40}
	a.shade(ch, r.Windows, top, bottom, false)
	colors := []string{"#0969da", "#8250df", "#bf3989", "#1a7f37", "#9a6700", "#cf222e"}
	i := 0
	ly := bottom + 32
	lx := plotL
	for _, node := range r.Env.Nodes {
		for _, proc := range []string{"agent", "proxy"} {
			pts := ""
			for _, s := range r.Samples {
				if s.Node != node || s.Time.Before(a.start) || s.Time.After(r.LoadEnd) {
					continue
				}
				p := s.Agent
				if proc == "proxy" {
					p = s.Proxy
				}
				if p.RSS == 0 {
					continue
				}
				pts += fmt.Sprintf("%d,%d ", a.x(s.Time), bottom-int(float64(p.RSS)/(1<<20)*float64(h)/maxMiB))
			}
			color := colors[i%len(colors)]
			label := proc + " " + node
			ch.Polylines = append(ch.Polylines, render.Polyline{Points: pts, Color: color, Title: label + " RSS", Width: 1.5})
			ch.Texts = append(ch.Texts, render.Text{X: lx, Y: ly, S: label, Color: color})
			lx += 8*len(label) + 16
			i++
		}
	}
	ch.Texts = append(ch.Texts, render.Text{X: plotL - 6, Y: top + 8, S: fmt.Sprintf("%.0f MiB", maxMiB), End: true, Muted: true},
		render.Text{X: plotL - 6, Y: bottom, S: "0", End: true, Muted: true})
	a.axis(ch, bottom)
	return ch
}
