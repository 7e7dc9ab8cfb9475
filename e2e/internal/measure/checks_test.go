package measure

import (
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

// results are n attempts from node to to, each with outcome o.
func results(node, to string, n int, o string) []echo.Result {
	var out []echo.Result
	for range n {
		r := echo.Result{ClientNode: node, To: to}
		switch o {
		case echo.OutcomeReply:
			r.OK, r.Reply = true, &echo.Reply{Pod: "b", Node: "w1"}
		case echo.OutcomeProxyClosed:
			r.Err = echo.ErrEOF
		case echo.OutcomeTimeout:
			r.Err = echo.ErrTimeout
		}
		out = append(out, r)
	}
	return out
}

func runOf(mode evidence.Mode, rss ...[]echo.Result) *evidence.Run {
	r := &evidence.Run{Mode: mode, MetRed: true, MetGreen: true}
	for _, rs := range rss {
		r.Tally(rs, func(string) string { return "z" })
	}
	return r
}

func stats(kv ...any) map[string]int64 {
	out := map[string]int64{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = int64(kv[i+1].(int))
	}
	return out
}

// TestBuildChecksReach: green is every node's own svc: cluster, red the
// passthrough; a green whose replies came through the passthrough (a proxy
// that ignored the flip) fails, and so does one where a node's cluster
// counted fewer connections than that node's replies.
func TestBuildChecksReach(t *testing.T) {
	web := Dialled{To: "10.96.0.20:80", Namespace: "legs", Service: "web"}
	cluster := clusterStat(web, "upstream_cx_total")
	if cluster != "cluster.svc.legs.web.80.upstream_cx_total" {
		t.Fatalf("cluster stat %q", cluster)
	}
	nodes := []string{"cp", "w1", "w2"}
	green := runOf(evidence.Green, results("w1", web.To, 10, echo.OutcomeReply), results("w2", web.To, 10, echo.OutcomeReply))
	red := runOf(evidence.Red, results("w1", web.To, 10, echo.OutcomeProxyClosed), results("w2", web.To, 10, echo.OutcomeProxyClosed))
	// through: every attempt went through chain; w1's cluster counted
	// clusterCx connections, w2's one per attempt it made through cap_svc.
	through := func(chain string, clusterCx int) map[string]nodeDelta {
		w2 := 0
		if chain == statSvcCx {
			w2 = 10
		}
		return map[string]nodeDelta{
			"w1": {stats: stats(chain, 10, cluster, clusterCx)},
			"w2": {stats: stats(chain, 10, cluster, w2)},
		}
	}
	for _, c := range []struct {
		name             string
		run              *evidence.Run
		deltas           map[string]nodeDelta
		metGreen, metRed bool
		failing          string
	}{
		{"green through the svc: clusters", green, through(statSvcCx, 10), true, false, ""},
		{"red through the passthrough", red, through(statPassSvcCx, 0), false, true, ""},
		{"replies through the passthrough", green, through(statPassSvcCx, 0), false, true, "w1: tcp.cap_svc.downstream_cx_total +0 (green wants ≥ 10"},
		{"one node's cluster short", green, through(statSvcCx, 7), false, false, "w1: cluster.svc.legs.web.80.upstream_cx_total +7 (green wants ≥ 10: 10 replies to 10.96.0.20:80 on w1)"},
		// A connect retried after a failure counts twice: ≥, not =.
		{"retried connects", green, through(statSvcCx, 12), true, false, ""},
	} {
		r := *c.run
		r.Checks = buildChecks(nodes, &r, []Dialled{web}, c.deltas, nil)
		r.ApplyChecks()
		if r.MetGreen != c.metGreen || r.MetRed != c.metRed {
			t.Errorf("%s: MetGreen %v MetRed %v, want %v %v; checks %+v", c.name, r.MetGreen, r.MetRed, c.metGreen, c.metRed, r.Checks)
		}
		if c.failing != "" {
			var got []string
			for _, f := range r.Failing(evidence.Green) {
				got = append(got, f.String(evidence.Green))
			}
			if !strings.Contains(strings.Join(got, "\n"), c.failing) {
				t.Errorf("%s: failing green %q, want %q", c.name, got, c.failing)
			}
		}
		for _, ch := range r.Checks {
			if ch.Node == "cp" {
				t.Errorf("%s: a node nobody dialled from got a check: %+v", c.name, ch)
			}
		}
	}
}

// TestBuildChecksRefusals: per node, the agent must count each
// proxy-closed attempt with the declared reason, nothing else, and its log
// must hold a record; a sum that is right over the nodes but wrong on each
// fails.
func TestBuildChecksRefusals(t *testing.T) {
	noep := Dialled{To: "10.96.0.30:80", Namespace: "legs", Service: "noep", Reason: agent.ReasonNoEndpoints}
	nodes := []string{"w1", "w2"}
	run := runOf(evidence.Green, results("w1", noep.To, 5, echo.OutcomeProxyClosed), results("w2", noep.To, 5, echo.OutcomeProxyClosed))
	refused := func(w1, w2 float64, reason string) map[string]nodeDelta {
		s := refusedSeries{reason: reason, namespace: "legs", service: "noep"}
		return map[string]nodeDelta{
			"w1": {stats: stats(statSvcCx, 5), refused: map[refusedSeries]float64{s: w1}},
			"w2": {stats: stats(statSvcCx, 5), refused: map[refusedSeries]float64{s: w2}},
		}
	}
	record := evidence.Refusal{Node: "w1", At: time.Unix(5, 0), Reason: agent.ReasonNoEndpoints, Namespace: "legs", Service: "noep", Destination: noep.To, Flag: "UH"}
	other := record
	other.Destination = "10.96.0.31:80"
	for _, c := range []struct {
		name     string
		deltas   map[string]nodeDelta
		records  []evidence.Refusal
		metGreen bool
	}{
		{"each node counted its own", refused(5, 5, agent.ReasonNoEndpoints), []evidence.Refusal{record}, true},
		{"right sum, wrong nodes", refused(10, 0, agent.ReasonNoEndpoints), []evidence.Refusal{record}, false},
		{"another reason", refused(5, 5, agent.ReasonNoService), []evidence.Refusal{record}, false},
		{"counted but never logged", refused(5, 5, agent.ReasonNoEndpoints), nil, false},
		{"logged for another address", refused(5, 5, agent.ReasonNoEndpoints), []evidence.Refusal{other}, false},
	} {
		r := *run
		r.Checks = buildChecks(nodes, &r, []Dialled{noep}, c.deltas, c.records)
		r.ApplyChecks()
		if r.MetGreen != c.metGreen {
			t.Errorf("%s: MetGreen %v, want %v; failing %+v", c.name, r.MetGreen, c.metGreen, r.Failing(evidence.Green))
		}
	}
	if got := firstRecords([]Dialled{noep}, []evidence.Refusal{other, {At: time.Unix(9, 0), Reason: record.Reason, Namespace: "legs", Service: "noep", Destination: noep.To}, record}); len(got) != 1 || got[0] != record {
		t.Errorf("firstRecords = %+v, want the earliest matching", got)
	}
	// Red: Phase 2 off, nothing counted, nothing logged.
	red := runOf(evidence.Red, results("w1", noep.To, 5, echo.OutcomeTimeout))
	red.Checks = buildChecks(nodes, red, []Dialled{noep}, map[string]nodeDelta{"w1": {stats: stats(statPassSvcCx, 5)}}, nil)
	red.ApplyChecks()
	if !red.MetRed || red.MetGreen {
		t.Errorf("red: MetRed %v MetGreen %v; checks %+v", red.MetRed, red.MetGreen, red.Checks)
	}
}

// TestDeltas: a node pod replaced during a run counts from its banked
// readings, then from 0; unbanked, its rise is unknown.
func TestDeltas(t *testing.T) {
	s := refusedSeries{reason: agent.ReasonNoService}
	p := &Probe{nodes: []string{"w1", "w2"},
		before: map[string]counters{
			"w1": {pod: "a", stats: stats(statSvcCx, 100)},
			"w2": {pod: "b", stats: stats(statSvcCx, 7), refused: map[refusedSeries]float64{s: 1}},
		},
		banked: map[string]counters{"w1": {pod: "a", stats: stats(statSvcCx, 104)}},
	}
	after := map[string]counters{
		"w1": {pod: "a2", stats: stats(statSvcCx, 3)},
		"w2": {pod: "b", stats: stats(statSvcCx, 9), refused: map[refusedSeries]float64{s: 3}},
	}
	d, err := p.deltas(after)
	if err != nil {
		t.Fatal(err)
	}
	if d["w1"].stats[statSvcCx] != 7 || d["w2"].stats[statSvcCx] != 2 || d["w2"].refused[s] != 2 {
		t.Errorf("deltas %+v", d)
	}
	p.banked = map[string]counters{}
	if _, err := p.deltas(after); err == nil || !strings.Contains(err.Error(), "not banked") {
		t.Errorf("an unbanked restart: %v", err)
	}
}

func TestUnsettled(t *testing.T) {
	web := Dialled{To: "10.96.0.20:80", Namespace: "legs", Service: "itp", Reason: agent.ReasonNoEndpoints}
	p := &Probe{nodes: []string{"cp"}, dialled: []Dialled{web}}
	green := runOf(evidence.Green, results("cp", web.To, 4, echo.OutcomeProxyClosed))
	red := runOf(evidence.Red, results("cp", web.To, 4, echo.OutcomeProxyClosed))
	s := refusedSeries{reason: agent.ReasonNoEndpoints, namespace: "legs", service: "itp"}
	for _, c := range []struct {
		name  string
		red   bool // the red run: the agent refuses nothing, and is not waited for
		d     nodeDelta
		wants string
	}{
		{"settled", false, nodeDelta{stats: stats(statSvcCx, 4), refused: map[refusedSeries]float64{s: 4}}, ""},
		{"red: nothing refused, nothing to wait for", true, nodeDelta{stats: stats(statPassSvcCx, 4)}, ""},
		{"an attempt not seen yet", false, nodeDelta{stats: stats(statSvcCx, 3)}, "saw 3 of 4 attempts"},
		{"refused, not counted yet", false, nodeDelta{stats: stats(statSvcCx, 4), refused: map[refusedSeries]float64{s: 2}},
			"the agent counted 2 of the 4 connections the proxy refused"},
		{"NC refusals count too", false, nodeDelta{stats: stats(statSvcCx, 4, statSvcNoRoute, 1), refused: map[refusedSeries]float64{s: 3}},
			"the agent counted 3 of the 4"},
	} {
		run := green
		if c.red {
			run = red
		}
		if got := p.unsettled(run, map[string]nodeDelta{"cp": c.d}); (got == "") != (c.wants == "") || !strings.Contains(got, c.wants) {
			t.Errorf("%s: %q, want %q", c.name, got, c.wants)
		}
	}
}

// TestBuildChecksOutsideRange: passthrough's control leg needs the
// default chain in both runs; Service-range chains are not its business.
func TestBuildChecksOutsideRange(t *testing.T) {
	pod := Dialled{To: "10.244.1.7:8080", OutsideRange: true}
	// Settled once the default chain saw them: the Service-range chains
	// have nothing to see.
	p := &Probe{nodes: []string{"w1"}, dialled: []Dialled{pod}}
	r := runOf(evidence.Green, results("w1", pod.To, 10, echo.OutcomeReply))
	if why := p.unsettled(r, map[string]nodeDelta{"w1": {stats: stats(statPassCx, 10)}}); why != "" {
		t.Errorf("unsettled: %q", why)
	}
	if why := p.unsettled(r, map[string]nodeDelta{"w1": {stats: stats(statPassCx, 9)}}); !strings.Contains(why, "passthrough chain saw 9 of 10") {
		t.Errorf("unsettled: %q", why)
	}
	for _, mode := range []evidence.Mode{evidence.Red, evidence.Green} {
		r := runOf(mode, results("w1", pod.To, 10, echo.OutcomeReply))
		r.Checks = buildChecks([]string{"w1"}, r, []Dialled{pod}, map[string]nodeDelta{"w1": {stats: stats(statPassCx, 10)}}, nil)
		r.ApplyChecks()
		if len(r.Checks) != 1 || !r.MetGreen || !r.MetRed {
			t.Errorf("%s: MetGreen %v MetRed %v; checks %+v", mode, r.MetGreen, r.MetRed, r.Checks)
		}
		// A direct connection (not captured) leaves the chain at 0.
		r = runOf(mode, results("w1", pod.To, 10, echo.OutcomeReply))
		r.Checks = buildChecks([]string{"w1"}, r, []Dialled{pod}, map[string]nodeDelta{"w1": {stats: stats()}}, nil)
		r.ApplyChecks()
		if r.MetGreen || r.MetRed {
			t.Errorf("%s, not captured: MetGreen %v MetRed %v", mode, r.MetGreen, r.MetRed)
		}
	}
}

// TestBuildChecksKubeProxys: a Service kube-proxy keeps (default/kubernetes)
// goes through cap_passthrough_svc in both runs: a node whose chain did not
// count its attempts fails either run, and no cap_svc or refusal check is
// made of it.
func TestBuildChecksKubeProxys(t *testing.T) {
	api := Dialled{To: "10.96.0.1:443", Namespace: "default", Service: "kubernetes", KubeProxys: true}
	for _, mode := range []evidence.Mode{evidence.Red, evidence.Green} {
		run := runOf(mode, results("w1", api.To, 5, echo.OutcomeReply))
		for _, c := range []struct {
			seen int
			ok   bool
		}{{5, true}, {4, false}} {
			checks := buildChecks([]string{"w1"}, run, []Dialled{api}, map[string]nodeDelta{"w1": {stats: stats(statPassSvcCx, c.seen)}}, nil)
			if len(checks) != 1 || checks[0].What != statPassSvcCx {
				t.Fatalf("%s: checks %v, want only %s", mode, checks, statPassSvcCx)
			}
			if got := checks[0].Holds(mode); got != c.ok {
				t.Errorf("%s, chain saw %d of 5: holds %v, want %v", mode, c.seen, got, c.ok)
			}
		}
	}
}

// TestBuildChecksUpstreamFailures: the proxy's closes of a target whose
// endpoint refuses connections (outlier) are not refusals: green needs the
// agent to count none of them, and fails if it counted them.
func TestBuildChecksUpstreamFailures(t *testing.T) {
	d := Dialled{To: "10.96.0.40:80", Namespace: "legs", Service: "outlier", UpstreamFailures: true}
	run := runOf(evidence.Green, results("w1", d.To, 5, echo.OutcomeProxyClosed), results("w1", d.To, 15, echo.OutcomeReply))
	cluster := clusterStat(d, "upstream_cx_total")
	for _, c := range []struct {
		refused float64
		ok      bool
	}{{0, true}, {5, false}} {
		delta := nodeDelta{stats: stats(statSvcCx, 20, cluster, 20), refused: map[refusedSeries]float64{}}
		if c.refused > 0 {
			delta.refused[refusedSeries{agent.ReasonNoEndpoints, "legs", "outlier"}] = c.refused
		}
		run.Checks = buildChecks([]string{"w1"}, run, []Dialled{d}, map[string]nodeDelta{"w1": delta}, nil)
		failing := run.Failing(evidence.Green)
		if (len(failing) == 0) != c.ok {
			t.Errorf("agent counted %g refusals: failing %v, want ok=%v", c.refused, failing, c.ok)
		}
	}
}
