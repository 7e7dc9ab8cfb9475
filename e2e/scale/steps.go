package scale

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSteps reads a comma-separated list of Service counts ("1000,2000,5000"), each larger
// than the one before: the population only grows.
func ParseSteps(s string) ([]int, error) {
	return parseIncreasing(s, "steps", 1, "a positive Service count")
}

// ParseLevels reads a comma-separated list of held-connection counts ("0,100,1000"), each ≥ 0
// and larger than the one before: connections are only added.
func ParseLevels(s string) ([]int, error) {
	return parseIncreasing(s, "held levels", 0, "a connection count (≥ 0)")
}

// parseIncreasing reads a comma-separated list of counts, each at least least and larger than
// the one before; what names the setting, want what a count must be.
func parseIncreasing(s, what string, least int, want string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			return nil, fmt.Errorf("%s %q: %q is not %s", what, s, f, want)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%s %q: %d after %d, want increasing counts", what, s, n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}
