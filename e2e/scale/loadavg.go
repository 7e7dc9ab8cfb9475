package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadLoadavg reads the 1, 5 and 15 minute load averages from /proc/loadavg (what uptime
// prints): every figure says how busy the machine was.
func ReadLoadavg() ([3]float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]float64{}, fmt.Errorf("load average: %w", err)
	}
	return parseLoadavg(string(b))
}

func parseLoadavg(s string) ([3]float64, error) {
	var l [3]float64
	f := strings.Fields(s)
	if len(f) < 3 {
		return l, fmt.Errorf("loadavg %q: want 3 averages", s)
	}
	for i := range l {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return [3]float64{}, fmt.Errorf("loadavg %q: %w", s, err)
		}
		l[i] = v
	}
	return l, nil
}
