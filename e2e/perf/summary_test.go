package perf

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

type echoTimed = echo.Timed

// summarize counts a stream's latest attempts by outcome, for an error.
func summarize(rs []echo.Timed) string {
	if len(rs) == 0 {
		return "no attempts"
	}
	n := map[string]int{}
	for _, r := range rs {
		if r.OK && r.Reply != nil {
			n["reply from "+r.Reply.Pod]++
		} else {
			n[echo.Outcome(r.Result)]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return fmt.Sprintf("%d attempts: %s", len(rs), strings.Join(parts, ", "))
}
