// Command report renders the e2e evidence directory into report.md and
// report.html. It exits 1 when the run did not pass (a leg failed, proved
// nothing, or the suite failed outside the legs), so make can use it as the
// final verdict.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aether-mesh/svclb/e2e/internal/report"
)

func main() {
	dir := flag.String("dir", "_artifacts", "evidence directory; report.md and report.html are written here")
	ginkgoJSON := flag.String("ginkgo-json", "", "Ginkgo JSON report (default <dir>/ginkgo.json)")
	failure := flag.String("failure", "", "a failure outside the suite to state in the report (e.g. a make step that failed)")
	flag.Parse()
	if *ginkgoJSON == "" {
		*ginkgoJSON = filepath.Join(*dir, "ginkgo.json")
	}
	in, err := report.Load(*dir, *ginkgoJSON)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	in.Failure = *failure
	if err := report.WriteFiles(*dir, in); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	if err := report.Markdown(os.Stdout, in); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	if !in.Passed() {
		os.Exit(1)
	}
}
