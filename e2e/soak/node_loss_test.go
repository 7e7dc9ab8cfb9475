package soak

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// lossRecord is record() with w2 lost from 82 to 99 s (started again at
// 88): steady had steady-2 there, and w1's proxy held it until 90.
func lossRecord() *Record {
	r := record()
	r.Windows = append(r.Windows, Window{Name: "loss", Kind: KindNodeLoss, Node: "w2", Start: at(82), End: at(99),
		Steps:   []Step{{"docker stop", at(82)}, {stepStart, at(88)}},
		Lost:    map[string][]string{TargetSteady: {"steady-2"}},
		Drained: map[string]time.Time{"w1 " + TargetSteady: at(90)}})
	c := &r.Clients[1]
	// w2's load stops at 82 and starts again at 93; it counts nothing
	// between, nor the second it stopped in, which began before the
	// window.
	r.Windows[len(r.Windows)-1].Start = at(82.3)
	var evs []echo.LoadEvent
	for _, e := range c.Events {
		if e.Kind != echo.LoadSecond || e.Second < at(82).Unix() || e.Second >= at(93).Unix() {
			evs = append(evs, e)
		}
	}
	c.Events = append(evs,
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(81.5), End: at(82.6), Target: TargetRoll, Err: "canceled"},
		echo.LoadEvent{Kind: echo.LoadLongCut, Time: at(82.4), End: at(82.5), Target: TargetSteady, Conn: 1, Err: echo.ErrEOF},
		echo.LoadEvent{Kind: echo.LoadStart, Time: at(93)},
	)
	r.Clients[0].Events = append(r.Clients[0].Events,
		// Answered by the lost backend, then cut.
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(83), End: at(91), Target: TargetSteady, Err: echo.ErrTimeout, Pod: "steady-2"},
		// Closed before a backend answered while w1's proxy held steady-2.
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(89), End: at(94), Target: TargetSteady, Err: echo.ErrEOF},
		echo.LoadEvent{Kind: echo.LoadLongCut, Time: at(84), End: at(92), Target: TargetSteady, Conn: 2, Pod: "steady-2", Err: echo.ErrTimeout},
	)
	return r
}

func TestJudgeNodeLoss(t *testing.T) {
	v := Judge(lossRecord())
	if !v.Pass {
		t.Fatalf("want a pass, got %v", v.Reasons)
	}
	for _, ct := range v.Totals {
		if ct.Client == "load-w2" && (ct.Rejoined != 1 || ct.Restarts != 0) {
			t.Errorf("load-w2: rejoined %d, restarts %d: want its restart put down to the loss", ct.Rejoined, ct.Restarts)
		}
	}
	for name, tc := range map[string]struct {
		change func(r *Record)
		want   string
	}{
		"closed after the proxy dropped the lost endpoints": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(90.5), End: at(91), Target: TargetSteady, Err: echo.ErrEOF})
		}, "after the proxy on w1 held no endpoint of steady"},
		"a target with nothing on the lost node": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(85), End: at(86), Target: TargetRoll, Err: echo.ErrEOF})
		}, "no backend of roll ran on the lost node"},
		"answered by a backend elsewhere": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(85), End: at(86), Target: TargetSteady, Err: echo.ErrReset, Pod: "steady-1"})
		}, "did not run on the lost node"},
		"a cut elsewhere": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadLongCut, Time: at(85), End: at(86), Target: TargetSteady, Conn: 5, Pod: "steady-1", Err: echo.ErrReset})
		}, "cut at"},
		"the lost client fails after the window": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(99.5), End: at(99.6), Target: TargetSteady, Err: echo.ErrRefused})
		}, "outside every fault window"},
		"a restart outside the window": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadStart, Time: at(99.5)})
		}, "restarted 1 times"},
		"the other node's client stopped counting": {func(r *Record) {
			r.Clients[0].Events = slicesDeleteSeconds(r.Clients[0].Events, 84, 86)
		}, "load-w1: 2 of"},
	} {
		t.Run(name, func(t *testing.T) {
			r := lossRecord()
			tc.change(r)
			v := Judge(r)
			if v.Pass || !strings.Contains(strings.Join(v.Reasons, "\n"), tc.want) {
				t.Errorf("pass %v, reasons %q: want a failure saying %q", v.Pass, v.Reasons, tc.want)
			}
		})
	}
}

// slicesDeleteSeconds drops the LoadSecond events of seconds [from, to).
func slicesDeleteSeconds(evs []echo.LoadEvent, from, to float64) []echo.LoadEvent {
	var out []echo.LoadEvent
	for _, e := range evs {
		if e.Kind == echo.LoadSecond && e.Second >= at(from).Unix() && e.Second < at(to).Unix() {
			continue
		}
		out = append(out, e)
	}
	return out
}

// TestNodeLossRecovery: the recovery is measured from docker start to the
// end of the second of the lost client's first answered attempt to a
// Service, and bounded.
func TestNodeLossRecovery(t *testing.T) {
	r := lossRecord()
	Analyze(r)
	if len(r.Figures.NodeLosses) != 1 {
		t.Fatalf("node losses %+v", r.Figures.NodeLosses)
	}
	got := r.Figures.NodeLosses[0]
	if want := time.Unix(at(93).Unix()+1, 0).Sub(at(88)); got.Client != "load-w2" || got.Answered != want || got.Down != 6*time.Second {
		t.Errorf("%+v: want load-w2 answered %s after docker start, down 6 s", got, want)
	}
	Analyze(r) // twice: one figure, one bound
	n := 0
	for _, b := range r.Figures.Bounds {
		if strings.HasPrefix(b.What, "node loss: load-w2") {
			n++
			if !b.OK {
				t.Errorf("bound %+v: want kept", b)
			}
		}
	}
	if n != 1 || len(r.Figures.NodeLosses) != 1 {
		t.Errorf("%d bounds, %d figures after two analyses: want one each", n, len(r.Figures.NodeLosses))
	}
	// No answered attempt to a Service after docker start.
	r.Clients[1].Events = slicesDeleteSeconds(r.Clients[1].Events, 88, 101)
	Analyze(r)
	if r.Verdict.Pass || !strings.Contains(strings.Join(r.Verdict.Reasons, "\n"), "node loss: load-w2 answered again") {
		t.Errorf("reasons %q: want the recovery's bound broken", r.Verdict.Reasons)
	}
}

// A lost address the proxy keeps is drained once a pod of the target
// serves it again (a short loss: the slices never dropped it and the node's
// IPAM gave the pod its old address back); one that nobody serves is not.
func TestDrainStateRevived(t *testing.T) {
	const lostAddr, other = "10.244.2.2:8080", "10.244.1.3:8080"
	held := []netip.AddrPort{netip.MustParseAddrPort(lostAddr), netip.MustParseAddrPort(other)}
	lost := []string{lostAddr}
	s := drainState{drained: map[string]time.Time{}}
	if dead := s.observe(at(1), "w1 steady", held, lost, nil); len(dead) != 1 || dead[0] != lostAddr {
		t.Fatalf("held lost %s, nobody serving it: dead %v, want [%s]", lostAddr, dead, lostAddr)
	}
	if _, ok := s.drained["w1 steady"]; ok {
		t.Fatal("drained while a dead lost endpoint is held")
	}
	if dead := s.observe(at(2), "w1 steady", held, lost, map[string]bool{lostAddr: true}); len(dead) != 0 {
		t.Fatalf("held lost %s, served again by its pod: dead %v, want none", lostAddr, dead)
	}
	if got := s.drained["w1 steady"]; !got.Equal(at(2)) {
		t.Fatalf("drained at %v, want %v (the first sample with its pod back)", got, at(2))
	}
	// Served again, then dead again (the pod lost once more): not drained,
	// and drained anew from the next clean sample.
	s.observe(at(3), "w1 steady", held, lost, nil)
	s.observe(at(4), "w1 steady", held[1:], lost, nil)
	if got := s.drained["w1 steady"]; !got.Equal(at(4)) {
		t.Fatalf("drained at %v, want %v", got, at(4))
	}
}
