package scale

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
)

// ReadMemory reads VmRSS and VmHWM from /proc/<pid>/status.
func ReadMemory(pid int) (scaleresult.Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return scaleresult.Memory{}, fmt.Errorf("process %d status: %w", pid, err)
	}
	return parseStatus(b)
}

func parseStatus(b []byte) (scaleresult.Memory, error) {
	var m scaleresult.Memory
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
			return scaleresult.Memory{}, fmt.Errorf("%s: unexpected value %q", key, val)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return scaleresult.Memory{}, fmt.Errorf("%s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return scaleresult.Memory{}, fmt.Errorf("VmRSS and VmHWM not both present (a kernel thread or a zombie?)")
	}
	return m, sc.Err()
}

// CountFDs counts a process's open file descriptors (the entries of /proc/<pid>/fd).
func CountFDs(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("process %d fds: %w", pid, err)
	}
	return len(es), nil
}
