package soak

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// record is a two-client run of 100 s with one window of every kind that
// allows something, and the failures each allows.
func record() *Record {
	r := &Record{LoadStart: at(0), LoadEnd: at(100), Env: Env{Nodes: []string{"w1", "w2"}, Proxy: "builtin"}}
	r.Windows = []Window{
		{Name: "roll", Kind: KindRolling, Start: at(10), End: at(20), Target: TargetRoll, Pods: []string{"roll-old"}},
		{Name: "scale", Kind: KindScale, Start: at(30), End: at(40), Target: TargetScale, Pods: []string{"scale-old"}},
		{Name: "proxy", Kind: KindProxy, Start: at(50), End: at(55), Node: "w1"},
		{Name: "agent", Kind: KindAgent, Start: at(60), End: at(65), Node: "w2"},
		{Name: "recreate", Kind: KindRecreate, Start: at(70), End: at(80), Target: TargetRecreate},
	}
	r.Refusals = []Refusal{
		{Time: at(31), Node: "w1", Reason: "no-endpoints", Namespace: Namespace, Service: TargetScale, Source: "10.244.1.5:1000", Flag: "UH"},
		{Time: at(71), Node: "w2", Reason: "no-service", Destination: "10.96.1.1:80", Source: "10.244.2.5:2000", Flag: "NC"},
	}
	second := func(s int64, target string, ok int, failed map[string]int) echo.LoadEvent {
		return echo.LoadEvent{Kind: echo.LoadSecond, Time: time.Unix(at(0).Unix()+s, 0), Second: at(0).Unix() + s, Target: target, OK: ok, Failed: failed}
	}
	c1 := Client{Pod: "load-w1", Node: "w1", Events: []echo.LoadEvent{{Kind: echo.LoadStart, Time: at(0)}}}
	c2 := Client{Pod: "load-w2", Node: "w2", Events: []echo.LoadEvent{{Kind: echo.LoadStart, Time: at(0)}}}
	for s := int64(0); s <= 100; s++ {
		c1.Events = append(c1.Events, second(s, TargetSteady, 5, nil))
		c2.Events = append(c2.Events, second(s, TargetSteady, 5, nil))
	}
	c1.Events = append(c1.Events,
		// Allowed: cut by the removed backend's shutdown, in the rolling window.
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(12), End: at(12.1), Target: TargetRoll, Err: echo.ErrEOF, Pod: "roll-old"},
		// Allowed: refused no-endpoints, matched by the client's address.
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(31), End: at(31.01), Target: TargetScale, Err: echo.ErrEOF, Local: "10.244.1.5:1000"},
		// Allowed: this client's node proxy was down.
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(51), End: at(51.001), Target: TargetSteady, Err: echo.ErrRefused},
		echo.LoadEvent{Kind: echo.LoadLongCut, Time: at(50.5), End: at(50.6), Target: TargetSteady, Conn: 3, Pod: "steady-1", Err: echo.ErrEOF, Sent: 1024, Verified: 512},
	)
	c2.Events = append(c2.Events,
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(71), End: at(71.01), Target: TargetRecreate, Err: echo.ErrReset, Local: "10.244.2.5:2000", Addr: "10.96.1.1:80"},
		echo.LoadEvent{Kind: echo.LoadLongEnd, Time: at(100), Target: TargetSteady, Conn: 4, Sent: 4096, Verified: 4096},
	)
	r.Clients = []Client{c1, c2}
	return r
}

func TestJudgePasses(t *testing.T) {
	r := record()
	v := Judge(r)
	if !v.Pass {
		t.Fatalf("want a pass, got %v", v.Reasons)
	}
	if len(v.Failures) != 4 || len(v.Cuts) != 1 {
		t.Fatalf("%d failures, %d cuts: want 4 and 1", len(v.Failures), len(v.Cuts))
	}
	for _, a := range v.Failures {
		if !a.Allowed || a.Window == "" {
			t.Errorf("%+v: want allowed in a window", a)
		}
	}
	if im := v.Impacts[1]; im.Refused["no-endpoints"] != 1 || im.Allowed != 1 {
		t.Errorf("scale impact %+v: want one no-endpoints refusal matched", im)
	}
	if v.Long.Cut != 1 || v.Long.OpenAtEnd != 1 || v.Long.Verified != 4608 {
		t.Errorf("long-lived %+v", v.Long)
	}
	if v.Attempts != 2*101*5 || v.Failed != 0 {
		t.Errorf("attempts %d failed %d", v.Attempts, v.Failed)
	}
}

// TestJudgeReusedAddress: a long soak reuses a client's ports, so two
// refusals can name the same address; the one nearest the attempt is its
// own, and the earlier one (another connection, refused no-service) does not
// decide.
func TestJudgeReusedAddress(t *testing.T) {
	r := record()
	earlier := r.Refusals[0]
	earlier.Time, earlier.Reason, earlier.Service = at(2), "no-service", ""
	later := earlier
	later.Time = at(60)
	r.Refusals = append([]Refusal{earlier, later}, r.Refusals...)
	v := Judge(r)
	if !v.Pass {
		t.Fatalf("want a pass, got %v", v.Reasons)
	}
	if im := v.Impacts[1]; im.Refused["no-endpoints"] != 1 || im.Refused["no-service"] != 0 {
		t.Errorf("scale impact %+v: want its own no-endpoints refusal matched", im)
	}
}

// TestJudgeFails: each change turns the pass into a failure whose reason
// says what broke.
func TestJudgeFails(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(r *Record)
		want   string
	}{
		"outside every window": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(90), End: at(90.1), Target: TargetSteady, Err: echo.ErrTimeout})
		}, "outside every fault window"},
		"the agent restart allows nothing": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(61), End: at(61.1), Target: TargetSteady, Err: echo.ErrReset})
		}, "the agent restarts"},
		"proxy window is the other node's": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(52), End: at(52.1), Target: TargetSteady, Err: echo.ErrRefused})
		}, "not on this client's node"},
		"scale refusal unmatched": {func(r *Record) {
			r.Refusals = r.Refusals[1:]
		}, "no agent logged a refusal"},
		"scale refusal of another reason": {func(r *Record) { r.Refusals[0].Reason = "no-service" }, "may only refuse no-endpoints"},
		"scale refusal of another connection": {func(r *Record) {
			// The same client address, reused by a later connection: not this attempt's refusal.
			r.Refusals[0].Time = at(31 + refusalMatchWithin.Seconds() + 1)
		}, "no agent logged a refusal"},
		"rolling: closed before a backend answered": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(15), End: at(15.1), Target: TargetRoll, Err: echo.ErrEOF})
		}, "maxUnavailable 0"},
		"rolling: a backend it kept": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(15), End: at(15.1), Target: TargetRoll, Err: echo.ErrEOF, Pod: "roll-new"})
		}, "did not remove"},
		"first attempt after the proxy window": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadFail, Time: at(55.2), End: at(55.3), Target: TargetSteady, Err: echo.ErrRefused})
		}, "outside every fault window"},
		"cut outside": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadLongCut, Time: at(85), End: at(85.2), Target: TargetSteady, Err: echo.ErrReset})
		}, "cut at"},
		"corrupt": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadLongCorrupt, Time: at(85), Target: TargetSteady, Detail: "byte 3"})
		}, "bytes came back changed"},
		"restarted client": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events, echo.LoadEvent{Kind: echo.LoadStart, Time: at(40)})
		}, "restarted"},
		"stalled client": {func(r *Record) {
			r.Clients[1].Events = r.Clients[1].Events[:50]
		}, "have no count"},
		"a timeout with too short a stall": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events,
				echo.LoadEvent{Kind: echo.LoadStall, Time: at(86), End: at(86.5)},
				echo.LoadEvent{Kind: echo.LoadFail, Time: at(85), End: at(93), Target: TargetSteady, Err: echo.ErrTimeout})
		}, "outside every fault window"},
		"a stall does not excuse a reset": {func(r *Record) {
			r.Clients[1].Events = append(r.Clients[1].Events,
				echo.LoadEvent{Kind: echo.LoadStall, Time: at(86), End: at(89)},
				echo.LoadEvent{Kind: echo.LoadFail, Time: at(85), End: at(93), Target: TargetSteady, Err: echo.ErrReset})
		}, "outside every fault window"},
		"the machine stalled too long": {func(r *Record) {
			r.Clients[0].Events = append(r.Clients[0].Events, echo.LoadEvent{Kind: echo.LoadStall, Time: at(81), End: at(93)})
		}, "the machine stalled"},
		"skipped":     {func(r *Record) { r.Clients[0].Events[5].Skipped = 3 }, "skipped 3 attempts"},
		"bound":       {func(r *Record) { r.Figures.Bounds = []Bound{{What: "proxy rss", Detail: "grew"}} }, "proxy rss: grew"},
		"fault error": {func(r *Record) { r.Windows[3].Error = "kill failed" }, "kill failed"},
	} {
		t.Run(name, func(t *testing.T) {
			r := record()
			tc.change(r)
			v := Judge(r)
			if v.Pass || !strings.Contains(strings.Join(v.Reasons, "\n"), tc.want) {
				t.Errorf("pass %v, reasons %q: want a failure saying %q", v.Pass, v.Reasons, tc.want)
			}
		})
	}
}

// TestJudgeStall: a timeout that overlapped the clients' stalls by a second
// or more is the machine's, and the seconds a stalled client could not
// count are excused.
func TestJudgeStall(t *testing.T) {
	r := record()
	r.Clients[0].Events = append(r.Clients[0].Events,
		echo.LoadEvent{Kind: echo.LoadStall, Time: at(86), End: at(87.5)},
		echo.LoadEvent{Kind: echo.LoadFail, Time: at(85), End: at(93), Target: TargetSteady, Err: echo.ErrTimeout})
	// The stalled client counted nothing in second 86.
	r.Clients[0].Events = slices.DeleteFunc(r.Clients[0].Events, func(e echo.LoadEvent) bool {
		return e.Kind == echo.LoadSecond && e.Second == at(86).Unix()
	})
	v := Judge(r)
	if !v.Pass {
		t.Fatalf("want a pass, got %v", v.Reasons)
	}
	i := slices.IndexFunc(v.Failures, func(a Attributed) bool { return a.Event.Err == echo.ErrTimeout })
	last := v.Failures[i]
	if last.Window != StallWindow || !last.Allowed || len(v.Stalls) != 1 {
		t.Errorf("%+v, stalls %v: want the timeout put down to the stall", last, v.Stalls)
	}
}

func TestGrowth(t *testing.T) {
	var ss []Sample
	for i := 0; i < 40; i++ {
		rss := int64(20 << 20)
		if i > 30 {
			rss = 80 << 20 // grows past 2 × 20 + 16 MiB
		}
		ss = append(ss, Sample{Time: at(float64(3 * i)), Node: "w1",
			Agent: Proc{PID: 7, RSS: rss, FDs: 20, Goroutines: 100},
			Proxy: Proc{PID: 9, RSS: 30 << 20, FDs: 40 + 2*i, Sockets: 30 + 2*i}})
	}
	gs := GrowthOf(ss)
	bad := map[string]bool{}
	for _, b := range GrowthBounds(gs) {
		if !b.OK {
			bad[b.What] = true
		}
	}
	if !bad["agent rss MiB on w1 (pid 7)"] || !bad["proxy sockets net of open connections on w1 (pid 9)"] || len(bad) != 2 {
		t.Errorf("bounds broken: %v; want the agent's RSS and the proxy's fds (+~60)", bad)
	}
}

func TestParseProcs(t *testing.T) {
	out := "proc svclb-agent 12 40960 9 17 9\nproc svclb-nodeproxy 34 20480 7 31 20\ngo_goroutines 88\nupstream_cx_active 6\n"
	var s Sample
	if err := parseProcs(&s, out); err != nil {
		t.Fatal(err)
	}
	want := Sample{Agent: Proc{PID: 12, RSS: 40 << 20, Threads: 9, FDs: 17, Sockets: 9, Goroutines: 88}, Proxy: Proc{PID: 34, RSS: 20 << 20, Threads: 7, FDs: 31, Sockets: 20, Upstreams: 6}}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

func TestReached(t *testing.T) {
	evs := []echo.LoadEvent{
		{Kind: echo.LoadFail, Time: at(1), Target: TargetRecreate},
		{Kind: echo.LoadResolve, Time: at(3), Target: TargetRecreate, Addr: "10.96.0.9:80"},
	}
	if ok, _ := reached(evs, TargetRecreate, "10.96.0.9:80", at(0)); ok {
		t.Error("resolved but not reached yet")
	}
	evs = append(evs, echo.LoadEvent{Kind: echo.LoadRecover, Time: at(4), Target: TargetRecreate, Addr: "10.96.0.9:80"})
	if ok, why := reached(evs, TargetRecreate, "10.96.0.9:80", at(0)); !ok {
		t.Errorf("recovered at the new address: %s", why)
	}
	// A late DNS server sends the client back to the old address.
	evs = append(evs, echo.LoadEvent{Kind: echo.LoadResolve, Time: at(5), Target: TargetRecreate, Addr: "10.96.0.1:80"})
	if ok, _ := reached(evs, TargetRecreate, "10.96.0.9:80", at(0)); ok {
		t.Error("resolved back to the old address, yet reached")
	}
	evs = append(evs,
		echo.LoadEvent{Kind: echo.LoadResolve, Time: at(6), Target: TargetRecreate, Addr: "10.96.0.9:80"},
		echo.LoadEvent{Kind: echo.LoadSecond, Time: at(7), Second: at(7).Unix(), Target: TargetRecreate, OK: 5},
	)
	if ok, why := reached(evs, TargetRecreate, "10.96.0.9:80", at(0)); !ok {
		t.Errorf("back at the new address and succeeded: %s", why)
	}
}

func TestParseFaults(t *testing.T) {
	got, err := parseFaults("scan, agent", nil)
	if err != nil || strings.Join(got, ",") != "agent,scan" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := parseFaults("agent,bogus", nil); err == nil {
		t.Error("an unknown fault must be an error")
	}
	if got, _ := parseFaults("none", nil); len(got) != 0 {
		t.Errorf("none: %v", got)
	}
}
