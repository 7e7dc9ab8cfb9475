package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aether-mesh/svclb/e2e/internal/suiterun"
)

func newList(g *globals) *cobra.Command {
	var legs []string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the legs and figures in the order they run, with their labels (no cluster needed)",
		Long: "list runs the suite binary's dry run (TestLegsList) and prints every leg and figure with its labels;\n" +
			"with --legs, which of them that selection runs (the same filter run takes).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bins, err := g.binaries()
			if err != nil {
				return &exitError{2, err}
			}
			suite, err := bins.SuiteBinary(cmd.Context())
			if err != nil {
				return &exitError{2, err}
			}
			filter := suiterun.LabelFilter(legs)
			all, err := suiterun.ListLegs(cmd.Context(), suite, bins.Repo, filter)
			if err != nil {
				return &exitError{2, err}
			}
			tw := tabwriter.NewWriter(g.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tLEG\tLABELS\tSELECTED")
			n := 0
			for i, l := range all {
				sel := ""
				if l.Selected {
					sel, n = "yes", n+1
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, l.Name, strings.Join(l.Labels, ","), sel)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "%d of %d selected by label filter %s (docs/legs.md says what each leg proves)\n", n, len(all), filter)
			if n == 0 {
				return &exitError{1, fmt.Errorf("--legs %q selects nothing", strings.Join(legs, " "))}
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&legs, "legs", nil, "a selection, as run takes it")
	return c
}
