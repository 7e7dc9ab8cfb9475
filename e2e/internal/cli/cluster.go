package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"

	"github.com/aether-mesh/svclb/e2e/internal/suiterun"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/kindconfig"
)

// clusterOptions are the flags of `cluster create` and `cluster delete`.
type clusterOptions struct {
	name, config, image, kubeconfigOut string
	loadImages                         bool
	wait                               time.Duration
}

// resolve reads and checks the kind config and fills the defaults that depend
// on it: the name (the config's) and the kubeconfig path (_output/kubeconfig-<name>).
func (o *clusterOptions) resolve(repo string) (*v1alpha4.Cluster, error) {
	if o.config == "" {
		return nil, fmt.Errorf("--kind-config is required (e.g. kindconfig/portable.yaml)")
	}
	c, err := kindconfig.LoadFile(o.config)
	if err != nil {
		return nil, err
	}
	if o.name == "" {
		o.name = c.Name
	}
	if o.name == "" {
		return nil, fmt.Errorf("%s names no cluster: pass --name", o.config)
	}
	if o.kubeconfigOut == "" {
		o.kubeconfigOut = filepath.Join(repo, "_output", "kubeconfig-"+o.name)
	}
	return c, nil
}

func (g *globals) repoRoot() (string, error) {
	if g.repo != "" {
		return g.repo, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return suiterun.FindRepo(wd)
}

func newCluster(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Create or delete a kind cluster from a kind config (e.g. kindconfig/portable.yaml)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newClusterCreate(g), newClusterDelete(g))
	return c
}

func newClusterCreate(g *globals) *cobra.Command {
	o := &clusterOptions{}
	c := &cobra.Command{
		Use:   "create",
		Short: "Create a kind cluster from --kind-config, write its kubeconfig and load svclb's images into it",
		Long: "create checks --kind-config as the suite needs it (kube-proxy nftables, the node image's CNI, disjoint\n" +
			"Service and pod CIDRs, one control plane, a zone on every node), creates the cluster with kind's Go API\n" +
			"(--name overrides the config's name, as kind's own --name does), writes its kubeconfig (default\n" +
			"_output/kubeconfig-<name>, for run --kubeconfig) and, unless --load-images=false, runs\n" +
			"make images KIND_CLUSTER=<name> (build cmd/svclb-* and kind-load them).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			repo, err := g.repoRoot()
			if err != nil {
				return &exitError{2, err}
			}
			cfg, err := o.resolve(repo)
			if err != nil {
				return &exitError{2, err}
			}
			p := kindcluster.NewProvider(kindcluster.ProviderWithLogger(kindcmd.NewLogger()))
			opts := []kindcluster.CreateOption{
				kindcluster.CreateWithV1Alpha4Config(cfg),
				kindcluster.CreateWithKubeconfigPath(o.kubeconfigOut),
				kindcluster.CreateWithWaitForReady(o.wait),
				kindcluster.CreateWithDisplayUsage(false),
				kindcluster.CreateWithDisplaySalutation(false),
			}
			if o.image != "" {
				opts = append(opts, kindcluster.CreateWithNodeImage(o.image))
			}
			fmt.Fprintf(g.out, "cluster create: %s from %s\n", o.name, o.config)
			if err := p.Create(o.name, opts...); err != nil {
				return &exitError{1, fmt.Errorf("creating kind cluster %s: %w", o.name, err)}
			}
			if o.loadImages {
				mk := exec.CommandContext(cmd.Context(), "make", "--no-print-directory", "images", "KIND_CLUSTER="+o.name)
				mk.Dir, mk.Stdout, mk.Stderr = repo, g.out, g.errOut
				if err := mk.Run(); err != nil {
					return &exitError{1, fmt.Errorf("loading svclb images into %s (make images): %w", o.name, err)}
				}
			}
			// kind waits for the control plane only; the suite reads the Nodes once at connect,
			// and a worker still tainted not-ready then would get no client pod.
			rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfigOut)
			if err != nil {
				return &exitError{1, fmt.Errorf("kubeconfig %s: %w", o.kubeconfigOut, err)}
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return &exitError{1, err}
			}
			if err := waitNodesReady(cmd.Context(), cs, o.wait, 2*time.Second, g.out); err != nil {
				return &exitError{1, err}
			}
			fmt.Fprintf(g.out, "cluster create: done; svclb-e2e run --kubeconfig %s --cluster %s\n", o.kubeconfigOut, o.name)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.name, "name", "", "cluster name (default: the kind config's name)")
	f.StringVar(&o.config, "kind-config", "", "kind v1alpha4 cluster config (required), e.g. kindconfig/portable.yaml")
	f.StringVar(&o.image, "image", "", "node image (default: kind's); offline: svclb/kind-node:v1.34.4")
	f.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "where to write the cluster's kubeconfig (default: _output/kubeconfig-<name>)")
	f.BoolVar(&o.loadImages, "load-images", true, "build svclb's images and kind-load them (make images)")
	f.DurationVar(&o.wait, "wait", 5*time.Minute, "how long kind waits for the control plane to be Ready, and then create for every node")
	return c
}

func newClusterDelete(g *globals) *cobra.Command {
	var name, kubeconfigOut string
	c := &cobra.Command{
		Use:   "delete",
		Short: "Delete a kind cluster created by cluster create, and its kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if name == "" {
				return &exitError{2, fmt.Errorf("--name is required")}
			}
			repo, err := g.repoRoot()
			if err != nil {
				return &exitError{2, err}
			}
			if kubeconfigOut == "" {
				kubeconfigOut = filepath.Join(repo, "_output", "kubeconfig-"+name)
			}
			p := kindcluster.NewProvider(kindcluster.ProviderWithLogger(kindcmd.NewLogger()))
			if err := p.Delete(name, kubeconfigOut); err != nil {
				return &exitError{1, fmt.Errorf("deleting kind cluster %s: %w", name, err)}
			}
			if err := os.Remove(kubeconfigOut); err != nil && !os.IsNotExist(err) {
				return &exitError{1, err}
			}
			fmt.Fprintf(g.out, "cluster delete: %s gone\n", name)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "cluster name (required)")
	c.Flags().StringVar(&kubeconfigOut, "kubeconfig-out", "", "the kubeconfig cluster create wrote (default: _output/kubeconfig-<name>)")
	return c
}

// waitNodesReady waits until every Node is Ready and carries no not-ready or unreachable taint
// (the node lifecycle controller removes those a moment after Ready), saying which are not.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, timeout, poll time.Duration, out io.Writer) error {
	var waiting []string
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			waiting = []string{err.Error()}
			return false, nil
		}
		waiting = waiting[:0]
		for _, n := range nodes.Items {
			if !nodeUp(n) {
				waiting = append(waiting, n.Name)
			}
		}
		return len(nodes.Items) > 0 && len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready within %s: %s: %w", timeout, strings.Join(waiting, ", "), err)
	}
	fmt.Fprintln(out, "cluster create: every node Ready")
	return nil
}

// nodeUp: Ready, and neither of the taints a node carries while it is not.
func nodeUp(n corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return cluster.NodeReady(n)
}
