package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/aether-mesh/svclb/e2e/internal/suiterun"
)

func newReport(g *globals) *cobra.Command {
	var artifacts, failure string
	c := &cobra.Command{
		Use:   "report",
		Short: "Re-render an artifacts directory's report.md and report.html and print the verdict table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bins, err := g.binaries()
			if err != nil {
				return &exitError{2, err}
			}
			bin, err := bins.ReportBinary(cmd.Context())
			if err != nil {
				return &exitError{2, err}
			}
			dir, err := filepath.Abs(artifacts)
			if err != nil {
				return &exitError{2, err}
			}
			err = suiterun.Report(cmd.Context(), bin, dir, failure, g.out)
			fmt.Fprintf(g.out, "report: %s, %s\n", filepath.Join(dir, "report.md"), filepath.Join(dir, "report.html"))
			switch {
			case errors.Is(err, suiterun.ErrNotPassed):
				return &exitError{1, fmt.Errorf("FAILED; artifacts in %s", dir)}
			case err != nil:
				return &exitError{2, err}
			}
			return nil
		},
	}
	c.Flags().StringVar(&artifacts, "artifacts", "_artifacts", "the artifacts directory of a run")
	c.Flags().StringVar(&failure, "failure", "", "a failure outside the suite to state in the report")
	return c
}
