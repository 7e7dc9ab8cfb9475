package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aether-mesh/svclb/e2e/internal/suiterun"
	"github.com/aether-mesh/svclb/fixtures/envoy"
	"github.com/aether-mesh/svclb/fixtures/evidence"
)

type runFlags struct {
	legs        []string
	proxy       string
	proxyChoice string
	nodeAccess  string
	registry    string
	envoyImage  string
	artifacts   string
	keep        bool
	report      bool
	failureFile string
	kindVersion string
	timeout     time.Duration
	grace       time.Duration
	start       int64
}

func newRun(g *globals) *cobra.Command {
	f := &runFlags{}
	c := &cobra.Command{
		Use:   "run",
		Short: "Run legs red then green; on SIGINT/SIGTERM restore the cluster and still write the report",
		Long: "run starts the suite binary with the environment it reads, its output in <artifacts>/e2e.log, and ends\n" +
			"with the verdict table (report.md and report.html in the artifacts). A SIGINT or SIGTERM is forwarded to the\n" +
			"suite once; it stops its leg and writes its reports; then the guard is removed and kube-proxy's cuts put\n" +
			"back on every node (verified), and the report of what ran is written. It exits 130 then.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd.Context(), g, f) },
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.legs, "legs", nil, "legs by name or label (\"reach affinity\" or --legs reach --legs affinity: either; or a Ginkgo label filter); default every leg but the opt-in figures")
	fl.StringVar(&f.proxy, "proxy", "builtin", "node proxy: builtin or envoy")
	fl.StringVar(&f.proxyChoice, "proxy-choice", "", "why that proxy, for the report (default: the flag)")
	fl.StringVar(&f.nodeAccess, "node-access", "", nodeAccessUsage+"; the suite's DaemonSet is deleted at the end unless --keep")
	registryFlag(fl, &f.registry)
	fl.StringVar(&f.envoyImage, "envoy-image", envoy.Image, "Envoy image (--proxy envoy)")
	fl.StringVar(&f.artifacts, "artifacts", "_artifacts", "evidence and reports directory")
	fl.BoolVar(&f.keep, "keep", false, "leave the legs' namespace and the infrastructure after the run (KEEP_CLUSTER=1)")
	fl.BoolVar(&f.report, "report", true, "render the report at the end (false: the caller does, as e2e/run.sh, which may delete the cluster first)")
	fl.StringVar(&f.failureFile, "failure-file", "", "with --report=false: write what the report must state about the run (interrupted, restored) to this file")
	fl.StringVar(&f.kindVersion, "kind-version", "", "kind's version, for the report (default: what kind version says: the kind on PATH, else _output/bin/kind)")
	fl.DurationVar(&f.timeout, "timeout", 45*time.Minute, "bound on the suite binary")
	fl.DurationVar(&f.grace, "grace", suiterun.DefaultGrace, "after a signal, how long the suite has to stop and write its reports")
	fl.Int64Var(&f.start, "start", 0, "Unix second the run started (e2e/run.sh's), for the progress lines; default now")
	return c
}

func runRun(ctx context.Context, g *globals, f *runFlags) error {
	// Signals first: one that arrives while the binaries build stops the run before the suite.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	t, err := g.target()
	if err != nil {
		return &exitError{2, err}
	}
	bins, err := g.binaries()
	if err != nil {
		return &exitError{2, err}
	}
	start := time.Now()
	if f.start > 0 {
		start = time.Unix(f.start, 0)
	}
	artifacts, err := filepath.Abs(f.artifacts)
	if err != nil {
		return &exitError{2, err}
	}
	choice := f.proxyChoice
	if choice == "" {
		choice = "--proxy " + f.proxy
	}
	tmp, err := os.MkdirTemp("", "svclb-e2e-")
	if err != nil {
		return &exitError{2, err}
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	kubeconfig, err := t.SuiteKubeconfig(tmp)
	if err != nil {
		return &exitError{2, err}
	}
	cfg := suiterun.Config{Kubeconfig: kubeconfig, Cluster: g.cluster, Artifacts: artifacts, Proxy: f.proxy, ProxyChoice: choice,
		NodeAccess: f.nodeAccess, Registry: f.registry, EnvoyImage: f.envoyImage, EnvoyVersion: envoyVersion(f.envoyImage), KindVersion: kindVersion(ctx, f.kindVersion, bins.Repo),
		Filter: suiterun.LabelFilter(f.legs), Keep: f.keep, Timeout: f.timeout, Start: start}
	if err := cfg.Validate(); err != nil {
		return &exitError{2, err}
	}
	// The restore after a signal builds the node-access DaemonSet here, from the same images.
	src, err := useRegistry(f.registry)
	if err != nil {
		return err
	}
	if err := suiterun.CleanArtifacts(artifacts, f.report); err != nil {
		return &exitError{2, fmt.Errorf("artifacts %s: %w", artifacts, err)}
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(g.out, "[svclb-e2e %5.0fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	access := f.nodeAccess
	if access == "" {
		access = "chosen by the suite"
	}
	say("%s; cluster %s; proxy %s (%s); node access %s; images %s; legs %q (label filter %s); keep %v; artifacts %s", t, g.cluster, f.proxy, choice,
		access, src, strings.Join(f.legs, " "), cfg.Filter, f.keep, artifacts)

	// The binaries, stopped by a signal.
	bctx, cancel := context.WithCancel(ctx)
	var early os.Signal
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case early = <-sigs:
			cancel()
		case <-stop:
		}
	}()
	buildStart := time.Now()
	// The renderer first: a suite that does not compile still gets its report.
	var reportBin, suite string
	if f.report {
		reportBin, err = bins.ReportBinary(bctx)
	}
	if err == nil {
		suite, err = bins.SuiteBinary(bctx)
	}
	close(stop)
	<-watched
	cancel()
	_ = evidence.Dir(artifacts).AddPhase("suite build", time.Since(buildStart))
	if early != nil {
		return finish(ctx, g, f, reportBin, artifacts, start, "interrupted by "+suiterun.SignalName(early)+" before the suite started", &exitError{130, errors.New("interrupted")})
	}
	if err != nil {
		return finish(ctx, g, f, reportBin, artifacts, start, "the e2e suite does not compile", &exitError{2, err})
	}
	say("suite %s", suite)

	restore := func(ctx context.Context, log io.Writer) error {
		u, err := uninstaller(ctx, t, g.cluster, f.nodeAccess, log)
		if err != nil {
			return err
		}
		return u.RestoreGuard(ctx)
	}
	r := &suiterun.Runner{Suite: suite, Dir: filepath.Join(bins.Repo, "e2e"), Config: cfg, Out: g.out, Signals: sigs, Grace: f.grace, Restore: restore}
	res, err := r.Run(ctx)
	if err != nil {
		return finish(ctx, g, f, reportBin, artifacts, start, err.Error(), &exitError{1, err})
	}
	say("suite exited %d after %s", res.ExitCode, res.Duration.Round(time.Second))
	failure := res.Failure()
	if failure == "" && res.ExitCode != 0 {
		if _, err := os.Stat(filepath.Join(artifacts, "ginkgo.json")); err != nil {
			failure = fmt.Sprintf("the suite exited %d before Ginkgo wrote a report (see e2e.log)", res.ExitCode)
		}
	}
	var verdict error
	switch {
	case res.Interrupted != nil:
		verdict = &exitError{130, errors.New(failure)}
	case res.ExitCode != 0:
		verdict = &exitError{1, fmt.Errorf("the suite exited %d; artifacts in %s", res.ExitCode, artifacts)}
	}
	return finish(ctx, g, f, reportBin, artifacts, start, failure, verdict)
}

// finish renders the report (unless the caller does) and returns the run's outcome: verdict
// when set, else the report's.
func finish(ctx context.Context, g *globals, f *runFlags, reportBin, artifacts string, start time.Time, failure string, verdict error) error {
	if !f.report || reportBin == "" {
		if f.failureFile != "" && failure != "" {
			if err := os.WriteFile(f.failureFile, []byte(failure+"\n"), 0o644); err != nil {
				fmt.Fprintf(g.errOut, "svclb-e2e: --failure-file: %v\n", err)
			}
		}
		if verdict == nil && failure != "" {
			verdict = &exitError{1, errors.New(failure)}
		}
		return verdict
	}
	_ = evidence.Dir(artifacts).AddPhase("total", time.Since(start))
	err := suiterun.Report(ctx, reportBin, artifacts, failure, g.out)
	fmt.Fprintf(g.out, "report: %s, %s\n", filepath.Join(artifacts, "report.md"), filepath.Join(artifacts, "report.html"))
	switch {
	case verdict != nil:
		return verdict
	case errors.Is(err, suiterun.ErrNotPassed):
		return &exitError{1, fmt.Errorf("FAILED; artifacts in %s", artifacts)}
	case err != nil:
		return &exitError{2, err}
	}
	fmt.Fprintf(g.out, "PASSED; artifacts in %s\n", artifacts)
	return nil
}

// envoyVersion is the image's tag (envoyproxy/envoy:v1.39.0 → v1.39.0).
func envoyVersion(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return "unknown"
}

// kindVersion is given's, else `kind version`'s of the kind CLI on PATH or of the one `make
// cluster` uses (<repo>/_output/bin/kind), for the report. Without either it says so, naming
// the kind library this binary links (what `svclb-e2e cluster create` creates with).
func kindVersion(ctx context.Context, given, repo string) string {
	if given != "" {
		return given
	}
	for _, kind := range []string{"kind", filepath.Join(repo, "_output", "bin", "kind")} {
		out, err := exec.CommandContext(ctx, kind, "version").Output()
		if f := strings.Fields(string(out)); err == nil && len(f) >= 2 {
			return f[1]
		}
	}
	if lib := linkedKind(); lib != "" {
		return "unknown (no kind CLI; svclb-e2e cluster create uses kind " + lib + ")"
	}
	return "unknown"
}

// linkedKind is the version of sigs.k8s.io/kind this binary was built with.
func linkedKind() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == "sigs.k8s.io/kind" {
			return m.Version
		}
	}
	return ""
}
