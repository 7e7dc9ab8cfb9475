package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/e2e/internal/suiterun"
	"github.com/aether-mesh/svclb/kindconfig"
)

// globals are the flags every command takes.
type globals struct {
	kubeconfig, context string
	cluster             string
	repo                string
	goCmd               string
	suiteBin, reportBin string
	out, errOut         io.Writer
	getenv              func(string) string
	home                func() (string, error)
}

func (g *globals) target() (Target, error) {
	return ResolveTarget(g.kubeconfig, g.context, g.getenv, g.home)
}

// clientset is the target and a clientset for it; its error is a usage error (exit 2).
func (g *globals) clientset() (Target, kubernetes.Interface, error) {
	t, err := g.target()
	if err != nil {
		return t, nil, &exitError{2, err}
	}
	cs, _, err := t.Clientset()
	if err != nil {
		return t, nil, &exitError{2, err}
	}
	return t, cs, nil
}

func (g *globals) binaries() (*suiterun.Binaries, error) {
	repo := g.repo
	if repo == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if repo, err = suiterun.FindRepo(wd); err != nil {
			return nil, err
		}
	}
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p)
	}
	suite, err := abs(g.suiteBin)
	if err != nil {
		return nil, err
	}
	report, err := abs(g.reportBin)
	if err != nil {
		return nil, err
	}
	return &suiterun.Binaries{Repo: repo, Go: g.goCmd, Suite: suite, Report: report, Log: g.errOut}, nil
}

// exitError carries a command's exit code: cobra's errors are 1, a usage error 2.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// NewRoot is the svclb-e2e command.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{out: stdout, errOut: stderr, getenv: os.Getenv, home: os.UserHomeDir}
	root := &cobra.Command{
		Use:   "svclb-e2e",
		Short: "svclb's acceptance suite on the cluster a kubeconfig reaches",
		Long: "svclb-e2e runs svclb's acceptance legs (the suite binary, go test -c ./e2e) against the cluster a kubeconfig reaches,\n" +
			"lists them, renders their report, checks a cluster for them and takes svclb off it again.\n" +
			"The kubeconfig: --kubeconfig, else $KUBECONFIG, else ~/.kube/config; the context: --context, else the current one.\n" +
			"make e2e-svc runs it on the suite's kind cluster (docs/cli.md).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "kubeconfig context (default: its current context)")
	pf.StringVar(&g.cluster, "cluster", kindconfig.DefaultName, "kind cluster name (kind names the node containers after it)")
	pf.StringVar(&g.repo, "repo", "", "repository root (default: found from the working directory)")
	pf.StringVar(&g.goCmd, "go", "go", "go command that builds the suite and report binaries")
	pf.StringVar(&g.suiteBin, "suite-binary", "", "the suite binary (default: built with go test -c ./e2e into _output/e2e.test)")
	pf.StringVar(&g.reportBin, "report-binary", "", "the report renderer (default: built from ./e2e/cmd/report into _output/e2e-report)")
	root.AddCommand(newRun(g), newList(g), newReport(g), newUninstall(g), newDoctor(g), newCluster(g), newImages(g))
	return root
}

// Main runs svclb-e2e with args and returns its exit code: 0 done (a run passed); 1 a run
// did not pass or a check failed; 2 bad usage or an error before anything ran; 130 a run
// interrupted.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "svclb-e2e:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "svclb-e2e:", err)
	return 2
}
