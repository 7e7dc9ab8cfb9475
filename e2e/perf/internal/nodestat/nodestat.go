package nodestat

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of a process.
type Sample struct {
	PID int
	// CPU is its container cgroup's CPU time since the container started.
	CPU time.Duration
	// RSS and HWM are VmRSS and VmHWM in bytes.
	RSS, HWM uint64
	// Started is when the process started (the kernel's boot time plus its
	// start in clock ticks; the node containers share the machine's kernel
	// and clock).
	Started time.Time
}

// Exec runs a command in a node container (cluster.Cluster.NodeExec).
type Exec func(ctx context.Context, node string, cmd ...string) (string, error)

// script prints the oldest process named $1 and its container's counters.
// The cgroup path in /proc/<pid>/cgroup is relative to the node container's
// cgroup namespace, whose root is the node's /sys/fs/cgroup.
const script = `p=$(pgrep -xo "$1") || { echo "no process $1" >&2; exit 3; }
echo "pid $p"
cg=$(awk -F: '$2 ~ /(^|,)cpuacct(,|$)/ {print $3}' /proc/$p/cgroup)
if [ -n "$cg" ]; then
  echo "cpu_ns $(cat /sys/fs/cgroup/cpuacct$cg/cpuacct.usage)"
else
  cg=$(awk -F: '$1 == "0" {print $3}' /proc/$p/cgroup)
  awk '$1 == "usage_usec" {printf "cpu_ns %d000\n", $2}' /sys/fs/cgroup$cg/cpu.stat
fi
awk '$1 == "VmRSS:" || $1 == "VmHWM:" {print $1, $2, $3}' /proc/$p/status
awk '$1 == "btime" {print "btime", $2}' /proc/stat
sed 's/.*) //' /proc/$p/stat | awk '{print "start_ticks", $20}'`

// Read reads the process named name (its exact command name, e.g.
// "kube-proxy", "svclb-agent") on node.
func Read(ctx context.Context, exec Exec, node, name string) (Sample, error) {
	out, err := exec(ctx, node, "sh", "-c", script, "nodestat", name)
	if err != nil {
		return Sample{}, fmt.Errorf("%s on %s: %w", name, node, err)
	}
	s, err := parse(out)
	if err != nil {
		return Sample{}, fmt.Errorf("%s on %s: %w", name, node, err)
	}
	return s, nil
}

func parse(out string) (Sample, error) {
	var s Sample
	var btime, ticks uint64
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return Sample{}, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		switch f[0] {
		case "pid":
			s.PID = int(v)
		case "cpu_ns":
			s.CPU = time.Duration(v)
		case "btime":
			btime = v
		case "start_ticks":
			ticks = v
		case "VmRSS:", "VmHWM:":
			if len(f) != 3 || f[2] != "kB" {
				return Sample{}, fmt.Errorf("%q: want a value in kB", sc.Text())
			}
			if f[0] == "VmRSS:" {
				s.RSS = v << 10
			} else {
				s.HWM = v << 10
			}
		default:
			continue
		}
		seen[f[0]] = true
	}
	for _, k := range []string{"pid", "cpu_ns", "VmRSS:", "VmHWM:", "btime", "start_ticks"} {
		if !seen[k] {
			return Sample{}, fmt.Errorf("no %s in %q", k, out)
		}
	}
	// The clock ticks of /proc/<pid>/stat are USER_HZ, 100 on Linux.
	s.Started = time.Unix(int64(btime), 0).Add(time.Duration(ticks) * 10 * time.Millisecond)
	return s, nil
}
