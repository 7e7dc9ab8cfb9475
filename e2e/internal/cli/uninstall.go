package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aether-mesh/svclb/e2e/internal/uninstall"
)

func newUninstall(g *globals) *cobra.Command {
	var timeout time.Duration
	var access, registry string
	namespaces := uninstall.WorkloadNamespaces
	c := &cobra.Command{
		Use:   "uninstall",
		Short: "Take svclb off the cluster: guard, agent and node proxy gone, every cut put back, verified on every node",
		Long: "uninstall deletes the guard DaemonSet, the node DaemonSet (agent and node proxy), their RBAC and ConfigMaps,\n" +
			"the namespace svclb-system and the suites' workload namespaces; puts kube-proxy's cut entries back (its pod\n" +
			"restarted on a node whose table still holds one), deletes svclb's nftables tables and svclb-cni's conflist and\n" +
			"binary where left; then reads every node's nft ruleset until it holds no svclb table and kube-proxy's table holds\n" +
			"no cut element. It exits 1 naming each node that is not clean. Nodes are reached as the suite reaches them\n" +
			"(--node-access); in daemonset mode the node-access DaemonSet is deployed first and deleted last, from\n" +
			"--registry where the run took the images from one.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := useRegistry(registry); err != nil {
				return err
			}
			t, err := g.target()
			if err != nil {
				return &exitError{2, err}
			}
			fmt.Fprintf(g.out, "uninstall: %s\n", t)
			u, err := uninstaller(cmd.Context(), t, g.cluster, access, g.out)
			if err != nil {
				return &exitError{2, err}
			}
			u.Timeout, u.Namespaces = timeout, namespaces
			if err := u.Uninstall(cmd.Context()); err != nil {
				return &exitError{1, err}
			}
			fmt.Fprintln(g.out, "uninstall: done; every node verified clean")
			return nil
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "bound on each wait (objects gone, kube-proxy back, a node clean)")
	c.Flags().StringVar(&access, "node-access", "", nodeAccessUsage)
	registryFlag(c.Flags(), &registry)
	c.Flags().StringSliceVar(&namespaces, "namespaces", namespaces, "workload namespaces to delete too")
	return c
}
