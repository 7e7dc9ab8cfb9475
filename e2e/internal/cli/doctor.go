package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aether-mesh/svclb/e2e/internal/doctor"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/envoy"
)

func newDoctor(g *globals) *cobra.Command {
	o := doctor.Options{}
	var access, registry string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Say what the cluster has and lacks for the suite; exit 1 when a requirement is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := cluster.ParseNodeAccess(access)
			if err != nil {
				return &exitError{2, err}
			}
			o.NodeAccess = mode
			if o.Source, err = useRegistry(registry); err != nil {
				return err
			}
			t, cs, err := g.clientset()
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "doctor: %s; proxy %s; images %s\n", t, o.Proxy, o.Source)
			lines := doctor.Run(cmd.Context(), cs, o)
			doctor.Print(g.out, lines)
			if doctor.Failed(lines) {
				return &exitError{1, errors.New("")}
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.Proxy, "proxy", "builtin", "the node proxy the run will take: builtin or envoy")
	c.Flags().StringVar(&access, "node-access", "", nodeAccessUsage)
	registryFlag(c.Flags(), &registry)
	c.Flags().StringVar(&o.EnvoyImage, "envoy-image", envoy.Image, "Envoy image (--proxy envoy)")
	return c
}
