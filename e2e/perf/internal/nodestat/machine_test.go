package nodestat

import (
	"math"
	"testing"
)

func TestMachineShares(t *testing.T) {
	before, err := parseMachine("cpu  100 0 50 800 50 0 0 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	// 100 ticks pass: 60 busy (40 user, 10 system, 10 softirq), 20 idle, 20 stolen.
	after, err := parseMachine("cpu  140 0 60 815 55 0 10 20 0 0")
	if err != nil {
		t.Fatal(err)
	}
	busy, steal := Shares(before, after)
	if math.Abs(busy-0.6) > 1e-9 || math.Abs(steal-0.2) > 1e-9 {
		t.Errorf("busy %.3f, steal %.3f: want 0.600, 0.200", busy, steal)
	}
	if b, s := Shares(after, before); b != 0 || s != 0 {
		t.Errorf("counters that went back: %v %v, want 0 0", b, s)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu a 0 0 0 0 0 0 0"} {
		if _, err := parseMachine(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
