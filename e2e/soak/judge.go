package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// Verdict is how a run was judged.
type Verdict struct {
	Pass bool `json:"pass"`
	// Reasons say why it failed, one line each (empty when it passed).
	Reasons []string `json:"reasons,omitempty"`
	// Failures are every failed attempt and failed opening of a long-lived
	// connection in the judged load, Cuts every long-lived connection cut,
	// each with the window it fell in.
	Failures []Attributed `json:"failures,omitempty"`
	Cuts     []Attributed `json:"cuts,omitempty"`
	Impacts  []Impact     `json:"impacts"`
	// Attempts started in the judged load, in all and per client.
	Attempts int           `json:"attempts"`
	OK       int           `json:"ok"`
	Failed   int           `json:"failed"`
	Totals   []ClientTotal `json:"totals"`
	Long     LongTotal     `json:"long"`
	// Stalls are the moments a load client's own clock lagged ≥ 1 s, merged
	// over every client: the machine could not run it.
	Stalls []Span `json:"stalls,omitempty"`
}

// Span is an interval of time.
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// StallWindow names the stalls in attributions.
const StallWindow = "machine stall"

// maxStallShare is the part of the judged load the machine may stall
// before the run says nothing: past it, the load it measured was not the
// one asked for.
const maxStallShare = 0.10

// ClientTotal is one client's count of attempts.
type ClientTotal struct {
	Client, Node      string
	Attempts, OK      int
	Failed            map[string]int
	Skipped, Restarts int
	// Rejoined counts the restarts of its load a fault that stops clients
	// made (a node loss): not Restarts.
	Rejoined int
	// Seconds is how many seconds of the judged load it reported;
	// Expected how many it should have.
	Seconds, Expected int
}

// LongTotal sums the long-lived connections.
type LongTotal struct {
	Opened, Cut, Corrupt, OpenAtEnd int
	Sent, Verified                  int64
}

// Attributed is one failure or cut and the window it fell in.
type Attributed struct {
	Client string         `json:"client"`
	Node   string         `json:"node"`
	Event  echo.LoadEvent `json:"event"`
	// Window is the name of the window it fell in ("" for none), Allowed
	// whether that window's rule allows it, Why the rule's words.
	Window  string `json:"window,omitempty"`
	Allowed bool   `json:"allowed"`
	Why     string `json:"why"`
}

// Impact is what one window did to the load.
type Impact struct {
	Window     string         `json:"window"`
	Kind       string         `json:"kind"`
	Seconds    float64        `json:"seconds"`
	Failures   map[string]int `json:"failures,omitempty"` // by class
	Allowed    int            `json:"allowed"`
	Disallowed int            `json:"disallowed"`
	Cuts       int            `json:"cuts"`
	// Refused counts the failures matched to an agent's refusal line, by
	// reason.
	Refused map[string]int `json:"refused,omitempty"`
	Notes   []string       `json:"notes,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// Judge judges a run's record: every failure and cut must fall in a window
// whose rule allows it (docs/soak.md, "Windows"), no byte may come back
// changed, no client may restart or fall behind, and every figure with a
// bound must keep it.
func Judge(r *Record) *Verdict {
	v := &Verdict{Stalls: stalls(r)}
	fail := func(format string, args ...any) { v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...)) }
	for _, w := range r.Windows {
		v.Impacts = append(v.Impacts, Impact{Window: w.Name, Kind: w.Kind, Seconds: w.End.Sub(w.Start).Seconds(), Notes: w.Notes, Error: w.Error})
		if w.Error != "" {
			fail("fault %s: %s", w.Name, w.Error)
		}
	}
	for _, c := range r.Clients {
		// Everything a client did from its start is judged: its first
		// connections (held while its node's proxy asks for the cluster)
		// too.
		start := clientStart(c)
		in := func(t time.Time) bool { return !t.Before(start) && !t.After(r.LoadEnd) }
		ct := ClientTotal{Client: c.Pod, Node: c.Node, Failed: map[string]int{}}
		secs := map[int64]bool{}
		// Long-lived connection (the load's run, its number) → its last
		// report: a load started again numbers its connections afresh.
		type conn struct{ run, n int }
		open := map[conn]echo.LoadEvent{}
		run := -1
		for _, e := range c.Events {
			switch e.Kind {
			case echo.LoadStart:
				run++
				switch {
				case run == 0: // its start
				case stoppedBy(r, c, e.Time, e.Time) != "":
					ct.Rejoined++
				default:
					ct.Restarts++
				}
			case echo.LoadSecond:
				if !in(e.Time) {
					continue
				}
				secs[e.Second] = true
				ct.OK += e.OK
				ct.Attempts += e.OK
				for k, n := range e.Failed {
					ct.Failed[k] += n
					ct.Attempts += n
				}
				ct.Skipped += e.Skipped
			case echo.LoadFail, echo.LoadLongFail:
				if !in(e.Time) {
					continue
				}
				v.Failures = append(v.Failures, attributeOrStall(r, v.Stalls, c, e, failureRule))
			case echo.LoadLongCut:
				if !in(e.Time) {
					continue
				}
				v.Long.Cut++
				v.Long.Sent += e.Sent
				v.Long.Verified += e.Verified
				delete(open, conn{run, e.Conn})
				v.Cuts = append(v.Cuts, attributeOrStall(r, v.Stalls, c, e, cutRule))
			case echo.LoadLongCorrupt:
				v.Long.Corrupt++
				delete(open, conn{run, e.Conn})
				fail("client %s: bytes came back changed on long-lived connection %d to %s (backend %s): %s", c.Pod, e.Conn, e.Target, e.Pod, e.Detail)
			case echo.LoadLongOpen, echo.LoadLongProgress, echo.LoadLongEnd:
				if e.Kind == echo.LoadLongOpen && in(e.Time) {
					v.Long.Opened++
				}
				if !e.Time.After(r.LoadEnd) {
					open[conn{run, e.Conn}] = e
				}
			}
		}
		// The connections still open when the judged load ended: their
		// bytes up to their last report.
		for _, e := range open {
			v.Long.OpenAtEnd++
			v.Long.Sent += e.Sent
			v.Long.Verified += e.Verified
		}
		ct.Seconds = len(secs)
		ct.Expected = int(r.LoadEnd.Unix()-start.Unix()) + 1
		if ct.Restarts > 0 {
			fail("client %s: its load restarted %d times (the container was restarted)", c.Pod, ct.Restarts)
		}
		if ct.Skipped > 0 {
			fail("client %s: the load generator skipped %d attempts (more than its in-flight bound open): the load was not the one asked for", c.Pod, ct.Skipped)
		}
		// Each target reports each second once; a second with none means
		// the generator did not run then: it must have been a stall, or a
		// fault that stopped this client (the second it stopped in too:
		// its attempts never ended).
		missing := 0
		for sec := start.Unix(); sec <= r.LoadEnd.Unix(); sec++ {
			from, to := time.Unix(sec, 0), time.Unix(sec+1, 0)
			if !secs[sec] && sec > start.Unix() && overlap(v.Stalls, from, to) == 0 && stoppedBy(r, c, from, to) == "" {
				missing++
			}
		}
		if missing > 0 {
			fail("client %s: %d of %d seconds of the judged load have no count, and its clock did not stall then", c.Pod, missing, ct.Expected)
		}
		v.Attempts += ct.Attempts
		v.OK += ct.OK
		v.Failed += ct.Attempts - ct.OK
		v.Totals = append(v.Totals, ct)
	}
	for i := range v.Impacts {
		im := &v.Impacts[i]
		for _, a := range v.Failures {
			if a.Window != im.Window {
				continue
			}
			if im.Failures == nil {
				im.Failures = map[string]int{}
			}
			im.Failures[a.Event.Err]++
			if a.Allowed {
				im.Allowed++
			} else {
				im.Disallowed++
			}
			if reason, ok := strings.CutPrefix(a.Why, refusedPrefix); ok {
				if im.Refused == nil {
					im.Refused = map[string]int{}
				}
				im.Refused[strings.Fields(reason)[0]]++
			}
		}
		for _, a := range v.Cuts {
			if a.Window == im.Window {
				im.Cuts++
				if !a.Allowed {
					im.Disallowed++
				}
			}
		}
	}
	for _, a := range v.Failures {
		if !a.Allowed {
			fail("client %s: %s %s to %s at %s (%s): %s", a.Client, a.Event.Kind, a.Event.Err, a.Event.Target, a.Event.Time.Format("15:04:05.000"), trimDetail(a.Event.Detail), a.Why)
		}
	}
	for _, a := range v.Cuts {
		if !a.Allowed {
			fail("client %s: long-lived connection %d to %s (backend %s) cut at %s (%s): %s", a.Client, a.Event.Conn, a.Event.Target, a.Event.Pod, a.Event.End.Format("15:04:05.000"), a.Event.Err, a.Why)
		}
	}
	var stalled time.Duration
	for _, sp := range v.Stalls {
		stalled += sp.End.Sub(sp.Start)
	}
	if judged := r.LoadEnd.Sub(r.LoadStart); judged > 0 && float64(stalled) > maxStallShare*float64(judged) {
		fail("the machine stalled the load clients %.1f s of %.0f s (over %.0f %%): the run measured the machine, not the path", stalled.Seconds(), judged.Seconds(), 100*maxStallShare)
	}
	for _, l := range r.Figures.Bounds {
		if !l.OK {
			fail("%s: %s", l.What, l.Detail)
		}
	}
	for _, e := range r.Errors {
		fail("%s", e)
	}
	// Many failures of one cause say one thing: keep the first 40 lines.
	if len(v.Reasons) > 40 {
		n := len(v.Reasons)
		v.Reasons = append(v.Reasons[:40], fmt.Sprintf("… and %d more", n-40))
	}
	v.Pass = len(v.Reasons) == 0
	return v
}

func trimDetail(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// stoppedBy names the window, if any, that meets [from, to] and whose
// fault stopped client c's load then (the fault's own word: stopper).
func stoppedBy(r *Record, c Client, from, to time.Time) string {
	for _, w := range r.Windows {
		if s, ok := windowFault(w).(stopper); ok && !to.Before(w.Start) && !from.After(w.End) && s.Stops(w, c) {
			return w.Name
		}
	}
	return ""
}

// rule says whether window w allows event e of client c, and why.
type rule func(r *Record, w Window, c Client, e echo.LoadEvent) (bool, string)

// attribute finds the window e overlaps ([e.Time, e.End] meets [Start,
// End]) whose rule allows it; failing that, the first it overlaps.
func attribute(r *Record, c Client, e echo.LoadEvent, allowed rule) Attributed {
	a := Attributed{Client: c.Pod, Node: c.Node, Event: e, Why: "outside every fault window"}
	end := e.End
	if end.IsZero() {
		end = e.Time
	}
	first := true
	for _, w := range r.Windows {
		if end.Before(w.Start) || e.Time.After(w.End) {
			continue
		}
		ok, why := allowed(r, w, c, e)
		if ok {
			a.Window, a.Allowed, a.Why = w.Name, true, why
			return a
		}
		if first {
			a.Window, a.Why, first = w.Name, why, false
		}
	}
	return a
}

const refusedPrefix = "refused "

// minStall is the least a failed attempt must have overlapped the
// clients' stalls to be put down to the machine: the stall watch's own
// threshold.
const minStall = time.Second

// attributeOrStall attributes e to the window whose rule allows it; failing
// that, a timeout that overlapped the clients' stalls by minStall or more
// is the machine's.
func attributeOrStall(r *Record, st []Span, c Client, e echo.LoadEvent, allowed rule) Attributed {
	a := attribute(r, c, e, allowed)
	if a.Allowed || e.Err != echo.ErrTimeout {
		return a
	}
	end := e.End
	if end.IsZero() {
		end = e.Time
	}
	if d := overlap(st, e.Time, end); d >= minStall {
		a.Window, a.Allowed = StallWindow, true
		a.Why = fmt.Sprintf("a timeout while the load clients' own clocks stalled %.1f s of its %.1f s: the machine could not run them", d.Seconds(), end.Sub(e.Time).Seconds())
	}
	return a
}

// stalls merges every client's stall events in the judged load.
func stalls(r *Record) []Span {
	var out []Span
	for _, c := range r.Clients {
		for _, e := range c.Events {
			if e.Kind == echo.LoadStall && !e.End.Before(r.LoadStart) && !e.Time.After(r.LoadEnd) {
				out = append(out, Span{e.Time, e.End})
			}
		}
	}
	slices.SortFunc(out, func(a, b Span) int { return a.Start.Compare(b.Start) })
	var merged []Span
	for _, sp := range out {
		if n := len(merged); n > 0 && !sp.Start.After(merged[n-1].End) {
			if sp.End.After(merged[n-1].End) {
				merged[n-1].End = sp.End
			}
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// overlap is how much of [from, to] the spans cover.
func overlap(spans []Span, from, to time.Time) time.Duration {
	var d time.Duration
	for _, sp := range spans {
		s, e := sp.Start, sp.End
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if e.After(s) {
			d += e.Sub(s)
		}
	}
	return d
}

// failureRule asks the fault that opened w what it allows to fail.
func failureRule(r *Record, w Window, c Client, e echo.LoadEvent) (bool, string) {
	return windowFault(w).Fails(r, w, c, e)
}

// cutRule asks the fault that opened w which long-lived connections it
// may cut.
func cutRule(r *Record, w Window, c Client, e echo.LoadEvent) (bool, string) {
	return windowFault(w).Cuts(r, w, c, e)
}

// refusalMatchWithin bounds how far the time of a refusal's log line may be
// from the end of the attempt it refused: the proxy flushes its access log
// every second and the agent logs an entry when it arrives (same machine,
// same clock).
const refusalMatchWithin = 30 * time.Second

// refusalOf finds the refusal an agent logged for the connection of e: the
// proxy logs the downstream's address, the client's own. A long soak reuses
// a client's ephemeral ports, so the same address names several
// connections: the refusal nearest the attempt's end, within
// refusalMatchWithin, is this one's.
func refusalOf(r *Record, e echo.LoadEvent) (Refusal, bool) {
	if e.Local == "" {
		return Refusal{}, false
	}
	end := e.End
	if end.IsZero() {
		end = e.Time
	}
	var best Refusal
	found := false
	for _, ref := range r.Refusals {
		if ref.Source != e.Local {
			continue
		}
		d := ref.Time.Sub(end).Abs()
		if d <= refusalMatchWithin && (!found || d < best.Time.Sub(end).Abs()) {
			best, found = ref, true
		}
	}
	return best, found
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
