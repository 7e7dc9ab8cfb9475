package scale

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadMemorySelf(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS == 0 || m.HWM < m.RSS {
		t.Fatalf("own memory %+v: want 0 < RSS <= HWM", m)
	}
}

func TestParseStatus(t *testing.T) {
	m, err := parseStatus([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t    1024 kB\nThreads:\t3\n"))
	if err != nil || m.RSS != 1<<20 || m.HWM != 2<<20 {
		t.Fatalf("parseStatus = %+v, %v; want RSS 1 MiB, HWM 2 MiB", m, err)
	}
	for _, bad := range []string{"Name:\tkthreadd\n", "VmRSS:\t1 MB\nVmHWM:\t1 kB\n", "VmRSS:\tx kB\nVmHWM:\t1 kB\n"} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q): no error", bad)
		}
	}
	if _, err := ReadMemory(-1); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("ReadMemory(-1) error %v, want one naming the pid", err)
	}
}

func TestReadCPUSelf(t *testing.T) {
	before, err := ReadCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the kernel's tick-granular account moves (a signal, not a fixed time).
	x := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for i := range 1 << 20 {
			x += i
		}
		if c, err := ReadCPU(os.Getpid()); err == nil && c.Self > before.Self {
			return
		}
	}
	t.Fatalf("own CPU time stayed %v after 10 s of spinning (x=%d)", before.Self, x)
}

func TestParseStat(t *testing.T) {
	// A command with a space and a ')' in it; utime 150, stime 50, cutime 7, cstime 3 ticks.
	line := "4242 (kube proxy) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 12 0 99 1000 200\n"
	c, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if c.Self != 2*time.Second || c.Children != 100*time.Millisecond || c.Total() != 2100*time.Millisecond {
		t.Fatalf("parseStat = %+v (total %v); want self 2s, children 100ms", c, c.Total())
	}
	if d := c.Sub(CPU{Self: time.Second}); d.Self != time.Second || d.Children != 100*time.Millisecond {
		t.Errorf("Sub = %+v", d)
	}
	for _, bad := range []string{"4242 kube-proxy S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 1 1 1 20"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}
