package nodestat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Machine is the first line of a node's /proc/stat: every CPU's time, in
// clock ticks, since boot. A container's /proc/stat is its kernel's, so on
// kind every node reads the one machine.
type Machine struct {
	// Busy is user, nice, system, irq and softirq (guest time is within
	// user); Idle is idle and iowait; Steal is what the hypervisor ran
	// elsewhere while the node's CPUs wanted to run.
	Busy, Idle, Steal uint64
}

// ReadMachine reads node's CPU times.
func ReadMachine(ctx context.Context, exec Exec, node string) (Machine, error) {
	out, err := exec(ctx, node, "head", "-n1", "/proc/stat")
	if err != nil {
		return Machine{}, fmt.Errorf("/proc/stat on %s: %w", node, err)
	}
	m, err := parseMachine(out)
	if err != nil {
		return Machine{}, fmt.Errorf("/proc/stat on %s: %w", node, err)
	}
	return m, nil
}

func parseMachine(line string) (Machine, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return Machine{}, fmt.Errorf("want the cpu line (cpu user nice system idle iowait irq softirq steal …), got %q", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return Machine{}, fmt.Errorf("cpu line field %d: %w", i+1, err)
		}
		v[i] = n
	}
	return Machine{Busy: v[0] + v[1] + v[2] + v[5] + v[6], Idle: v[3] + v[4], Steal: v[7]}, nil
}

// Shares are the fractions of all the CPU time between two readings that
// was busy and that was stolen (0 and 0 when no tick passed or the
// counters went back, as after a reboot).
func Shares(before, after Machine) (busy, steal float64) {
	if after.Busy < before.Busy || after.Idle < before.Idle || after.Steal < before.Steal {
		return 0, 0
	}
	b, i, s := after.Busy-before.Busy, after.Idle-before.Idle, after.Steal-before.Steal
	total := b + i + s
	if total == 0 {
		return 0, 0
	}
	return float64(b) / float64(total), float64(s) / float64(total)
}
