package ratelog

import (
	"testing"
	"time"
)

// TestGateBurstThenRate: Burst events pass at once, then one per Every, and the line that
// passes reports how many were held back before it.
func TestGateBurstThenRate(t *testing.T) {
	var g Gate
	lim := Limit{Burst: 3, Every: time.Second}
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if n, ok := g.Allow(t0, lim); !ok || n != 0 {
			t.Fatalf("event %d of the burst: %d %v", i, n, ok)
		}
	}
	for i := range 5 {
		if _, ok := g.Allow(t0.Add(time.Duration(i)*100*time.Millisecond), lim); ok {
			t.Fatalf("event %d over the burst passed", i)
		}
	}
	if n, ok := g.Allow(t0.Add(time.Second), lim); !ok || n != 5 {
		t.Fatalf("after a second: %d %v, want 5 true", n, ok)
	}
	if _, ok := g.Allow(t0.Add(1500*time.Millisecond), lim); ok {
		t.Fatal("half a token passed")
	}
}

// TestKeyedFlood: a flood of one key is cut to the burst plus the rate and summarised; another
// key is not held back by it; the total limit holds across keys; idle keys are forgotten and
// the key count is bounded.
func TestKeyedFlood(t *testing.T) {
	k := Keyed[string]{Limit: Limit{Burst: 10, Every: 100 * time.Millisecond}, Total: Limit{Burst: 15, Every: 50 * time.Millisecond}, MaxKeys: 4}
	t0 := time.Unix(1000, 0)
	passed := 0
	for i := range 10000 { // 10,000 events in one second
		if k.Allow("scan", t0.Add(time.Duration(i)*100*time.Microsecond)) {
			passed++
		}
	}
	if passed > 10+10 {
		t.Fatalf("%d of 10000 passed in a second, want at most the burst 10 + 10", passed)
	}
	if !k.Allow("other", t0.Add(time.Second)) {
		t.Fatal("another key was held back by the flood")
	}
	s := k.Flush(t0.Add(time.Second))
	if len(s) != 1 || s[0].Key != "scan" || s[0].N != int64(10000-passed) {
		t.Fatalf("flush %+v, want scan %d", s, 10000-passed)
	}
	if s := k.Flush(t0.Add(time.Hour)); len(s) != 0 || k.Keys() != 0 {
		t.Fatalf("an hour later: %+v, %d keys", s, k.Keys())
	}
	for i := range 100 {
		k.Allow(string(rune('a'+i%26))+string(rune('a'+i/26)), t0.Add(2*time.Hour))
	}
	if n := k.Keys(); n > 5 {
		t.Fatalf("%d keys held, want at most MaxKeys 4 + the shared one", n)
	}
}
