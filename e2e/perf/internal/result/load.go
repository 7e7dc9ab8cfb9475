package result

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Load is the machine's load average at a moment (/proc/loadavg, what
// uptime prints) and its CPU count.
type Load struct {
	At     time.Time `json:"at"`
	Load1  float64   `json:"load1"`
	Load5  float64   `json:"load5"`
	Load15 float64   `json:"load15"`
	CPUs   int       `json:"cpus"`
}

// ReadLoad reads /proc/loadavg.
func ReadLoad(cpus int) (Load, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return Load{}, err
	}
	return parseLoad(string(b), cpus, time.Now())
}

func parseLoad(s string, cpus int, at time.Time) (Load, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return Load{}, fmt.Errorf("loadavg %q: want 3 averages", s)
	}
	l := Load{At: at, CPUs: cpus}
	for i, p := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Load{}, fmt.Errorf("loadavg %q: %w", s, err)
		}
		*p = v
	}
	return l, nil
}

// String is uptime's wording.
func (l Load) String() string {
	if l.At.IsZero() {
		return "load unknown"
	}
	return fmt.Sprintf("load average %.2f, %.2f, %.2f on %d cores at %s", l.Load1, l.Load5, l.Load15, l.CPUs, l.At.Format("15:04:05"))
}
