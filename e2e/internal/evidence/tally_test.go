package evidence

import (
	"testing"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

func TestTally(t *testing.T) {
	zone := func(node string) string { return map[string]string{"w1": "zone-a"}[node] }
	var r Run
	r.Tally([]echo.Result{
		{OK: true, Reply: &echo.Reply{Pod: "b-1", Node: "w1"}},
		{OK: true, Reply: &echo.Reply{Pod: "b-2", Node: "w2", Zone: "zone-b"}},
		{Err: echo.ErrEOF}, {Err: echo.ErrRefused}, {Err: echo.ErrTimeout}, {Err: echo.ErrBadReply},
	}, zone)
	if r.Attempts != 6 || r.Replies != 2 || r.ProxyClosed != 1 || r.HostRefused != 1 || r.Timeouts != 1 || r.OtherErrors != 1 {
		t.Errorf("counts %+v", r)
	}
	if r.Backends["b-1@w1/zone-a"] != 1 || r.Backends["b-2@w2/zone-b"] != 1 {
		t.Errorf("backends %v", r.Backends)
	}
	if got := r.Counts(); got != "2/6 replies, 1 proxy-closed, 1 ECONNREFUSED, 1 timeouts, 1 other errors" {
		t.Errorf("Counts() = %q", got)
	}
}

// TestTallyFlows counts per client node and destination, from what
// fixtures/workload stamps on each result.
func TestTallyFlows(t *testing.T) {
	zone := func(string) string { return "z" }
	var r Run
	reply := func(node, to, pod string) echo.Result {
		return echo.Result{OK: true, ClientNode: node, To: to, Reply: &echo.Reply{Pod: pod, Node: "b"}}
	}
	r.Tally([]echo.Result{
		reply("w2", "10.96.0.1:80", "p1"), reply("w1", "10.96.0.1:80", "p1"), reply("w1", "10.96.0.1:80", "p2"),
		{ClientNode: "w1", To: "10.96.0.1:80", Err: echo.ErrEOF},
		{ClientNode: "w1", To: "10.96.0.9:80", Err: echo.ErrTimeout},
	}, zone)
	r.Tally([]echo.Result{reply("cp", "10.96.0.1:80", "p2")}, zone)
	if got, want := r.ClientNodes(), []string{"cp", "w1", "w2"}; !equal(got, want) {
		t.Fatalf("ClientNodes() = %v, want %v", got, want)
	}
	w1 := r.FromNode("w1", "10.96.0.1:80")
	if w1.Attempts != 3 || w1.Replies != 2 || w1.ProxyClosed != 1 || w1.Backends["p1@b/z"] != 1 || w1.Backends["p2@b/z"] != 1 {
		t.Errorf("w1 → 10.96.0.1:80: %+v", w1)
	}
	if all := r.FromNode("w1"); all.Attempts != 4 || all.Timeouts != 1 || all.Counts() != "2/4 replies, 1 proxy-closed, 1 timeouts" {
		t.Errorf("w1, every destination: %+v (%s)", all, all.Counts())
	}
	if none := r.FromNode("w1", "10.96.0.2:80"); none.Attempts != 0 {
		t.Errorf("a destination nobody dialled: %+v", none)
	}
	// Flows are sorted (node, destination) and add up to the run.
	sum := 0
	for i, f := range r.Flows {
		sum += f.Attempts
		if i > 0 && (r.Flows[i-1].Node > f.Node || (r.Flows[i-1].Node == f.Node && r.Flows[i-1].To >= f.To)) {
			t.Errorf("flows out of order: %+v", r.Flows)
		}
	}
	if sum != r.Attempts || r.Attempts != 6 {
		t.Errorf("flows hold %d attempts, the run %d", sum, r.Attempts)
	}
}

// TestTallyReplyWithoutBackend: an answer that names no backend (a TLS
// handshake with the apiserver, a DNS lookup) counts as a reply in its flow
// and adds no backend.
func TestTallyReplyWithoutBackend(t *testing.T) {
	var r Run
	r.Tally([]echo.Result{{OK: true, To: "10.96.0.1:443", ClientNode: "w1"}}, func(string) string { return "z" })
	if f := r.FromNode("w1", "10.96.0.1:443"); r.Replies != 1 || f.Replies != 1 || len(r.Backends) != 0 || len(f.Backends) != 0 {
		t.Errorf("run %+v, flow %+v", r, f)
	}
}
