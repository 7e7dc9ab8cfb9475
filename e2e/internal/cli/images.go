package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aether-mesh/svclb/e2e/internal/imagepush"
	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// registryUsage is the --registry flag's text (run, doctor, uninstall, images push).
const registryUsage = "registry host[:port][/path] the cluster pulls the project's images from, as <registry>/svclb/<name>:dev\n" +
	"with pull policy Always (svclb-e2e images push puts them there); default: none, the images are kind-loaded\n" +
	"(make images) and never pulled"

// registryFlag adds --registry to fs.
func registryFlag(fs *pflag.FlagSet, registry *string) {
	fs.StringVar(registry, "registry", "", registryUsage)
}

// useRegistry parses --registry and makes it the process's image source (images.Use), for
// the manifests this process builds; a bad value is a usage error.
func useRegistry(registry string) (images.Source, error) {
	s, err := images.Parse(registry)
	if err != nil {
		return s, &exitError{2, fmt.Errorf("--registry %q: %w", registry, err)}
	}
	images.Use(s)
	return s, nil
}

func newImages(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "images",
		Short: "The project's images on a cluster that is not kind: push them to a registry",
		Args:  cobra.NoArgs,
	}
	var registry, docker string
	push := &cobra.Command{
		Use:   "push",
		Short: "Tag each svclb/<name>:dev that make images built as <registry>/svclb/<name>:dev and docker push it",
		Long: "push tags the images the legs deploy (" + fmt.Sprint(contract.SuiteImages) + ", and " + contract.ImagePerfClient + "\n" +
			"when make perf built it) from the local Docker engine under --registry and pushes them with the docker CLI, which\n" +
			"must be logged in where the registry asks (docker login). It checks that every image is there before it pushes\n" +
			"any, and stops at the first push that fails. Then svclb-e2e run --registry <the same> deploys them from there.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if registry == "" {
				return &exitError{2, fmt.Errorf("--registry is required: where to push the images")}
			}
			to, err := useRegistry(registry)
			if err != nil {
				return err
			}
			p := &imagepush.Pusher{Docker: docker, Out: g.out}
			pushed, err := p.Push(cmd.Context(), to, contract.SuiteImages, []string{contract.ImagePerfClient})
			if err != nil {
				return &exitError{1, fmt.Errorf("images push: %w", err)}
			}
			fmt.Fprintf(g.out, "images push: %d images in %s; run with --registry %s\n", len(pushed), registry, registry)
			return nil
		},
	}
	registryFlag(push.Flags(), &registry)
	push.Flags().StringVar(&docker, "docker", "docker", "the docker command")
	c.AddCommand(push)
	return c
}
