package traffic

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

var t0 = time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)

func at(ms int, pod string) echo.Timed {
	r := echo.Timed{Start: t0.Add(time.Duration(ms) * time.Millisecond)}
	if pod == "" {
		r.Err = echo.ErrEOF
	} else {
		r.OK, r.Reply = true, &echo.Reply{Pod: pod}
	}
	return r
}

func TestStreamSplitsLines(t *testing.T) {
	var s Stream
	var all []byte
	for i, r := range []echo.Timed{at(0, "a"), at(10, ""), at(20, "x")} {
		r.Attempt = i + 1
		b, _ := json.Marshal(r)
		all = append(all, append(b, '\n')...)
	}
	// Written in pieces that cut lines anywhere.
	for len(all) > 0 {
		n := min(7, len(all))
		if _, err := s.Write(all[:n]); err != nil {
			t.Fatal(err)
		}
		all = all[n:]
	}
	s.End(nil)
	rs, done, err := s.Attempts()
	if err != nil || !done || len(rs) != 3 || rs[2].Reply.Pod != "x" || !rs[1].Start.Equal(t0.Add(10*time.Millisecond)) || s.Len() != 3 {
		t.Fatalf("Attempts = %d %v %v: %+v", len(rs), done, err, rs)
	}
	var bad Stream
	if _, err := bad.Write([]byte("not json\n")); err == nil {
		t.Error("a line that is not JSON: no error")
	}
	bad.End(fmt.Errorf("exec ended"))
	if _, _, err := bad.Attempts(); err == nil || err.Error() == "exec ended" {
		t.Errorf("the parse error must win over how the exec ended: %v", err)
	}
}

func TestFirstReply(t *testing.T) {
	// Out of order, as they end.
	rs := []echo.Timed{at(0, "a"), at(30, "x"), at(10, "a"), at(20, "x"), at(5, "x"), at(40, "")}
	if got, ok := FirstReply(rs, "x", t0.Add(10*time.Millisecond)); !ok || !got.Equal(t0.Add(20*time.Millisecond)) {
		t.Errorf("FirstReply(x, since 10ms) = %v %v, want 20ms", got.Sub(t0), ok)
	}
	if _, ok := FirstReply(rs, "x", t0.Add(31*time.Millisecond)); ok {
		t.Error("FirstReply after the last: found one")
	}
	if got, ok := FirstAnyReply(rs, t0.Add(6*time.Millisecond)); !ok || !got.Equal(t0.Add(10*time.Millisecond)) {
		t.Errorf("FirstAnyReply = %v %v", got.Sub(t0), ok)
	}
}

func TestGone(t *testing.T) {
	rs := []echo.Timed{at(0, "x"), at(10, "a"), at(20, "x"), at(30, "a"), at(40, "a"), at(50, ""), at(60, "a")}
	last, gone := Gone(rs, "x", t0.Add(25*time.Millisecond), 3)
	if !gone || !last.Equal(t0.Add(20*time.Millisecond)) {
		t.Errorf("Gone(k=3) = %v %v, want last 20ms, gone", last.Sub(t0), gone)
	}
	if _, gone := Gone(rs, "x", t0.Add(25*time.Millisecond), 4); gone {
		t.Error("Gone(k=4): three replies from a after x's last, not four")
	}
	// The event came after the last reply from x: count from the event.
	if _, gone := Gone(rs, "x", t0.Add(35*time.Millisecond), 3); gone {
		t.Error("Gone(after 35ms, k=3): only two replies after it")
	}
	if last, gone := Gone(rs, "nobody", t0, 4); !last.IsZero() || !gone {
		t.Errorf("Gone(nobody) = %v %v", last, gone)
	}
}

func TestOnly(t *testing.T) {
	rs := []echo.Timed{at(0, "x"), at(10, "a"), at(20, ""), at(30, "a")}
	if !Only(rs, "a", t0.Add(5*time.Millisecond), 2) || Only(rs, "a", t0.Add(-time.Millisecond), 2) || Only(rs, "a", t0.Add(5*time.Millisecond), 3) {
		t.Error("Only: wrong")
	}
	if Ms(1500*time.Microsecond) != 1.5 {
		t.Error("Ms")
	}
}

func TestTrim(t *testing.T) {
	var s Stream
	for _, r := range []echo.Timed{at(0, "a"), at(30, "a"), at(10, "a"), at(20, "")} {
		b, _ := json.Marshal(r)
		if _, err := s.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	s.Trim(t0.Add(10 * time.Millisecond))
	rs, _, _ := s.Attempts()
	if len(rs) != 3 || rs[0].Start.Sub(t0) != 30*time.Millisecond || rs[1].Start.Sub(t0) != 10*time.Millisecond {
		t.Fatalf("after Trim(10ms): %+v", rs)
	}
}
