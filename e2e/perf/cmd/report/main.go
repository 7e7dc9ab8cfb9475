// Command report re-renders the perf suite's report.md and report.html from
// the JSON results in a directory (make perf-report).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aether-mesh/svclb/e2e/perf/internal/report"
)

func main() {
	dir := flag.String("dir", "_artifacts/perf", "the perf artifacts directory")
	flag.Parse()
	if err := report.Render(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}
