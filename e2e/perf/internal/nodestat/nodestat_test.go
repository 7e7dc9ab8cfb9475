package nodestat

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

func TestParse(t *testing.T) {
	s, err := parse("pid 392\ncpu_ns 10174708498\nVmHWM: 64740 kB\nVmRSS: 62992 kB\nbtime 1764500000\nstart_ticks 150\n")
	if err != nil || s.PID != 392 || s.CPU != 10174708498*time.Nanosecond || s.HWM != 64740<<10 || s.RSS != 62992<<10 ||
		!s.Started.Equal(time.Unix(1764500001, 5e8)) {
		t.Fatalf("parse = %+v, %v", s, err)
	}
	for _, bad := range []string{"pid 1\nVmRSS: 1 kB\nVmHWM: 1 kB\n", "pid 1\ncpu_ns x\n", "pid 1\ncpu_ns 1\nVmRSS: 1 MB\nVmHWM: 1 kB\n"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q): no error", bad)
		}
	}
}

// TestReadHere runs the script on the host that runs the test, against its own
// process, through a local Exec: the script's pgrep, cgroup and /proc reads
// work as they would in a node container.
func TestReadHere(t *testing.T) {
	for _, c := range []string{"sh", "pgrep", "awk"} {
		prereq.Command(t, c)
	}
	local := func(ctx context.Context, _ string, cmd ...string) (string, error) {
		out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = errors.New(string(ee.Stderr))
		}
		return string(out), err
	}
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	name := string(comm[:len(comm)-1])
	s, err := Read(context.Background(), local, "here", name)
	if err != nil {
		t.Skipf("cannot read this process's cgroup here (%v)", err) // a container without /sys/fs/cgroup
	}
	if s.PID <= 0 || s.CPU <= 0 || s.RSS == 0 || s.HWM < s.RSS || time.Since(s.Started) < 0 || time.Since(s.Started) > time.Hour {
		t.Fatalf("Read(%s) = %+v", name, s)
	}
	if _, err := Read(context.Background(), local, "here", "no-such-process-"+strconv.Itoa(os.Getpid())); err == nil {
		t.Error("Read of a missing process: no error")
	}
}
