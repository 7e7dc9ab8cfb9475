package scale

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times: the kernel exports them in USER_HZ,
// which the Linux ABI fixes at 100 on every architecture this runs on (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// CPU is the CPU time a process used, as the kernel accounts it.
type CPU struct {
	Self     time.Duration // utime + stime of every thread
	Children time.Duration // cutime + cstime: children it waited for (kube-proxy's `nft` runs)
}

// Total is the process's own time plus its reaped children's: kube-proxy programs nftables
// by running nft, whose CPU is part of what programming costs.
func (c CPU) Total() time.Duration { return c.Self + c.Children }

// Sub is c minus an earlier reading of the same process.
func (c CPU) Sub(earlier CPU) CPU {
	return CPU{Self: c.Self - earlier.Self, Children: c.Children - earlier.Children}
}

// ReadCPU reads a process's CPU times from /proc/<pid>/stat.
func ReadCPU(pid int) (CPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPU{}, fmt.Errorf("process %d stat: %w", pid, err)
	}
	return parseStat(b)
}

// parseStat reads fields 14–17 (utime, stime, cutime, cstime) of a /proc/<pid>/stat line. The
// second field, the command in parentheses, may hold spaces and parentheses itself: the fields
// are counted from the last ')'.
func parseStat(b []byte) (CPU, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return CPU{}, fmt.Errorf("stat %.80q: no command field", b)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return CPU{}, fmt.Errorf("stat %.80q: %d fields after the command, want ≥ 15", b, len(f))
	}
	var ticks [4]uint64
	for j := range ticks {
		v, err := strconv.ParseUint(string(f[11+j]), 10, 64) // fields 14..17
		if err != nil {
			return CPU{}, fmt.Errorf("stat field %d: %w", 14+j, err)
		}
		ticks[j] = v
	}
	tick := time.Second / userHZ
	return CPU{Self: time.Duration(ticks[0]+ticks[1]) * tick, Children: time.Duration(ticks[2]+ticks[3]) * tick}, nil
}
