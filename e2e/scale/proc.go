package scale

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory is a process's resident set as the kernel reports it, in bytes.
type Memory struct {
	RSS uint64 `json:"rss"` // VmRSS: resident now
	HWM uint64 `json:"hwm"` // VmHWM: peak resident ("high water mark")
}

// ReadMemory reads VmRSS and VmHWM from /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("process %d status: %w", pid, err)
	}
	return parseStatus(b)
}

func parseStatus(b []byte) (Memory, error) {
	var m Memory
	var seen int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		// The kernel prints these in kB ("VmRSS:\t  123456 kB").
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("%s: unexpected value %q", key, val)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return Memory{}, fmt.Errorf("VmRSS and VmHWM not both present (a kernel thread or a zombie?)")
	}
	return m, sc.Err()
}

// MiB formats bytes as MiB with one decimal.
func MiB(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }

// CountFDs counts a process's open file descriptors (the entries of /proc/<pid>/fd).
func CountFDs(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d fds: %w", pid, err)
	}
	return len(es), nil
}
