package scale

import (
	"os"
	"strings"
	"testing"
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
	if got := MiB(3 << 19); got != "1.5" {
		t.Errorf("MiB = %s", got)
	}
	if _, err := ReadMemory(-1); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("ReadMemory(-1) error %v, want one naming the pid", err)
	}
}
