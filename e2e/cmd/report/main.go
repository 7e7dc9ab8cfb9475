// Command report renders the e2e evidence directory into report.md and
// report.html and prints report.md (-summary: the one-screen verdict table). Its exit code is the run's verdict, so
// make can use it as the last step: 0 passed; 1 not passed (a selected leg
// failed, proved nothing or did not run, the selection is not recorded, or
// the suite failed outside the legs); 2 the evidence could not be read or
// the reports not written.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aether-mesh/svclb/e2e/internal/report"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "_artifacts", "evidence directory; report.md and report.html are written here")
	ginkgoJSON := fs.String("ginkgo-json", "", "Ginkgo JSON report (default <dir>/ginkgo.json)")
	failure := fs.String("failure", "", "a failure outside the suite to state in the report (e.g. a make step that failed)")
	summary := fs.Bool("summary", false, "print the one-screen verdict table instead of report.md")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ginkgoJSON == "" {
		*ginkgoJSON = filepath.Join(*dir, "ginkgo.json")
	}
	in, err := report.Load(*dir, *ginkgoJSON)
	if err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	in.Failure = *failure
	r := report.Build(in)
	if err := report.WriteFiles(*dir, r); err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	render := r.Markdown
	if *summary {
		render = r.Summary
	}
	if err := render(stdout); err != nil {
		fmt.Fprintln(stderr, "report:", err)
		return 2
	}
	if !r.Passed {
		return 1
	}
	return 0
}
