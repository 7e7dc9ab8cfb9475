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
