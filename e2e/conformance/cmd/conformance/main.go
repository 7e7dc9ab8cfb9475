package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/e2e-framework/klient"

	"github.com/aether-mesh/svclb/e2e/conformance/internal/enroll"
	"github.com/aether-mesh/svclb/e2e/conformance/internal/specs"
	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/kindconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

type options struct {
	kubeconfig, clusterName string
	e2eTest, kubectl        string
	set, coreFile, focus    string
	phases                  []string
	artifacts, docsLink     string
	enroll                  enroll.Options
	phaseTimeout            time.Duration
	shards                  int
	reportOnly              bool
	names                   []string
}

// prog is the runner's progress: on stderr, and in -artifacts once the flags are read. Its
// lines count from when `make e2e-peer` started (SVCLB_PEER_START), else from now.
var (
	start = startedAt()
	prog  = kit.NewProgress("e2e-peer", start, "")
)

func startedAt() time.Time {
	var e kit.Env
	return e.Start("SVCLB_PEER_START")
}

func logf(format string, args ...any) { prog.Printf(format, args...) }

func main() {
	var o options
	var phases string
	flag.StringVar(&o.kubeconfig, "kubeconfig", "_output/kubeconfig", "kubeconfig of the kind cluster")
	flag.StringVar(&o.clusterName, "cluster", kindconfig.DefaultName, "kind cluster name")
	flag.StringVar(&o.e2eTest, "e2e-test", "_output/bin/k8s-e2e.test", "Kubernetes' e2e binary (go test -c k8s.io/kubernetes/test/e2e)")
	flag.StringVar(&o.kubectl, "kubectl", "_output/bin/kubectl", "kubectl of the same version, for --kubectl-path")
	flag.StringVar(&o.set, "set", specs.SetCore, "the set: "+specs.SetCore+" (the -core-file list), "+specs.SetServices+" (every spec of "+strings.Join(specs.ServiceFiles, ", ")+", from e2e.test --list-tests) or a file of spec names, one per line")
	flag.StringVar(&o.coreFile, "core-file", "e2e/conformance/focus.txt", "the "+specs.SetCore+" set: one spec name per line")
	flag.StringVar(&o.focus, "focus", "", "--ginkgo.focus regex instead of the set's (the report still lists the set)")
	flag.StringVar(&phases, "phases", "red,green", "phases to run, in order: kube-proxy, red, green (comma or space separated)")
	flag.StringVar(&o.artifacts, "artifacts", "_artifacts/peer", "report directory (one subdirectory per phase)")
	flag.StringVar(&o.docsLink, "docs-link", "../../docs/peer.md", "docs/peer.md as the report links it from the artifacts directory")
	flag.StringVar(&o.enroll.Selector, "selector", "e2e-framework in (services,traffic-distribution)", "namespace selector enrolling the e2e framework's namespaces (it labels them e2e-framework=<baseName>)")
	flag.StringVar(&o.enroll.Cut, "cut", enroll.CutGuard, "who cuts the enrolled namespaces' Services: guard (following the agent's namespace selector) or label (this runner labels them)")
	flag.StringVar(&o.enroll.GuardCut, "guard-cut", contract.GuardCutProxy, "the guard's cut mode (-cut=guard): proxy (only the node proxy's connections refused; the framework's clients keep kube-proxy) or all (kube-proxy's entries cut for everyone, as in the legs)")
	flag.StringVar(&o.enroll.Proxy, "proxy", manifests.ProxyBuiltin, "node proxy: builtin or envoy")
	flag.StringVar(&o.enroll.EnvoyImage, "envoy-image", "", "Envoy image for -proxy=envoy (default: fixtures/envoy's)")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 0, "bound of one phase's e2e.test runs (0: 8m for the core set, 40m otherwise)")
	flag.IntVar(&o.shards, "shards", 0, "e2e.test processes per phase, each running a share of the set side by side (upstream runs these specs in parallel too: none is [Serial]); 0: 8 for red (each red spec waits out a 2-minute timeout), 5 otherwise; 1 with -focus")
	flag.BoolVar(&o.reportOnly, "report-only", false, "only rebuild report.md, report.html and peer.json from the phases in -artifacts")
	flag.Parse()
	o.phases = strings.FieldsFunc(phases, func(r rune) bool { return r == ',' || r == ' ' })
	o.enroll.Log = logf
	if err := o.enroll.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		os.Exit(2)
	}
	prog = kit.NewProgress("e2e-peer", start, o.artifacts)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		logf("FAILED: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	set, err := loadSet(ctx, o)
	if err != nil {
		return err
	}
	o.names = set
	if o.phaseTimeout == 0 {
		o.phaseTimeout = 40 * time.Minute
		if o.set == specs.SetCore {
			o.phaseTimeout = 8 * time.Minute
		}
	}
	var runErr error
	if !o.reportOnly {
		runErr = runPhases(ctx, o)
	}
	rep, err := specs.Build(o.artifacts, set)
	if err != nil {
		return errors.Join(runErr, err)
	}
	if err := rep.Write(o.artifacts, o.docsLink); err != nil {
		return errors.Join(runErr, err)
	}
	md, err := rep.Markdown(o.docsLink)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Print(md)
	logf("report: %s (and report.html)", filepath.Join(o.artifacts, "report.md"))
	if rep.Failed() {
		runErr = errors.Join(runErr, fmt.Errorf("the report has %d FAIL, %d NOT RUN", rep.Counts[specs.Fail], rep.Counts[specs.NotRun]))
	}
	return runErr
}

func runPhases(ctx context.Context, o options) (retErr error) {
	for _, ph := range o.phases {
		if !slices.Contains(specs.AllPhases, ph) {
			return fmt.Errorf("phase %q: want one of %v", ph, specs.AllPhases)
		}
	}
	kc, err := klient.NewWithKubeConfigFile(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
	}
	c, err := cluster.New(ctx, o.clusterName, kc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.artifacts, 0o755); err != nil {
		return err
	}
	// Its phases set the agent's flags and the cut: one run at a time (docs/cli.md).
	lock, err := cluster.LockRun(ctx, c.CS, cluster.RunHolder("conformance"), logf)
	if err != nil {
		return err
	}
	defer lock.Release() // after the restore below: deferred first, runs last
	var enrolled *enroll.Enrolled
	defer func() {
		if enrolled == nil {
			return
		}
		// The run's context may be cancelled (Ctrl-C): restore on a fresh one.
		rctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		t0 := time.Now()
		if err := enrolled.Restore(rctx); err != nil {
			retErr = errors.Join(retErr, err)
		}
		logf("restored in %.0fs", time.Since(t0).Seconds())
	}()
	var errs []error
	for _, ph := range o.phases {
		setup := "nothing enrolled, nothing cut: plain kube-proxy"
		if ph != specs.PhaseKubeProxy {
			if enrolled == nil {
				t0 := time.Now()
				enrolled, err = enroll.Enroll(ctx, c, o.enroll)
				if err != nil {
					return fmt.Errorf("enroll: %w", err)
				}
				logf("enrolled in %.0fs: %s", time.Since(t0).Seconds(), o.enroll.Describe())
			}
			on := ph == specs.PhaseGreen
			if err := enrolled.Phase(ctx, on); err != nil {
				return err
			}
			setup = fmt.Sprintf("%s; agent phase1=phase2=%v refusal=%s", o.enroll.Describe(), on, contract.RefusalReset)
		} else if enrolled != nil {
			return errors.New("phase kube-proxy must come before red and green")
		}
		if err := runE2E(ctx, o, c, ph, setup); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// loadSet is the set's spec names. With -report-only the set a run saved in
// the artifacts is read back, so the report needs neither e2e.test nor the
// flags of the run.
func loadSet(ctx context.Context, o options) ([]string, error) {
	if o.reportOnly {
		if names, err := specs.ReadSet(filepath.Join(o.artifacts, specs.SavedSetFile)); err == nil {
			return names, nil
		}
	}
	var names []string
	var err error
	switch o.set {
	case specs.SetCore:
		names, err = specs.ReadSet(o.coreFile)
	case specs.SetServices:
		var listed []specs.Listed
		if listed, err = specs.ListSpecs(ctx, o.e2eTest); err == nil {
			names, err = specs.InFiles(listed, specs.ServiceFiles)
		}
	default:
		names, err = specs.ReadSet(o.set)
	}
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", o.set, err)
	}
	if !o.reportOnly {
		if err := os.MkdirAll(o.artifacts, 0o755); err != nil {
			return nil, err
		}
		if err := specs.SaveSet(filepath.Join(o.artifacts, specs.SavedSetFile), o.set, names); err != nil {
			return nil, err
		}
	}
	logf("set %s: %d specs", o.set, len(names))
	return names, nil
}

// waves are the --ginkgo.focus of each e2e.test process of phase: the first
// wave's run side by side, then each later wave alone (upstream's [Serial]
// and [Disruptive] specs, one process running them one after another).
func waves(o options, phase string) [][]string {
	if o.focus != "" {
		return [][]string{{o.focus}}
	}
	n := o.shards
	if n <= 0 {
		n = 5
		if phase == specs.PhaseRed {
			n = 8
		}
	}
	parallel, serial := specs.Plan(o.names, n)
	var side []string
	for _, share := range parallel {
		side = append(side, specs.Focus(share))
	}
	out := [][]string{side}
	if len(serial) > 0 {
		out = append(out, []string{specs.Focus(serial)})
	}
	return out
}

// runE2E runs phase into <artifacts>/<phase>: one e2e.test per focus, side by
// side, each with its own report directory shard-<i>.
func runE2E(ctx context.Context, o options, c *cluster.Cluster, phase, setup string) error {
	dir := filepath.Join(o.artifacts, phase)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	kubectl, err := filepath.Abs(o.kubectl)
	if err != nil {
		return err
	}
	ws := waves(o, phase)
	var fs []string
	for _, w := range ws {
		fs = append(fs, w...)
	}
	run := specs.PhaseRun{Phase: phase, Started: time.Now(), Setup: setup, Focus: fs, Shards: len(fs), Enrolled: phase != specs.PhaseKubeProxy}
	var cov *enroll.Coverage
	if run.Enrolled {
		// A spec is judged only if its namespace was enrolled (and so cut).
		if cov, err = enroll.WatchCoverage(ctx, c.CS, o.enroll.Selector); err != nil {
			return err
		}
	}
	logf("phase %s: %s; %d e2e.test side by side, then %d alone (logs: %s/shard-*/e2e.log)", phase, setup, len(ws[0]), len(fs)-len(ws[0]), dir)
	// Ginkgo stops each process at its --ginkgo.timeout, the share of the
	// phase's bound that is left; the context's bound is a minute later.
	deadline := time.Now().Add(o.phaseTimeout)
	rctx, cancel := context.WithDeadline(ctx, deadline.Add(time.Minute))
	defer cancel()
	codes := make([]int, len(fs))
	errs := make([]error, len(fs))
	i0 := 0
	for wi, w := range ws {
		left := time.Until(deadline)
		if left <= 0 {
			errs[i0] = fmt.Errorf("wave %d of %d not started: the phase's bound (%s) is spent", wi+1, len(ws), o.phaseTimeout)
			break
		}
		var wg sync.WaitGroup
		for j, focus := range w {
			i := i0 + j
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], errs[i] = shard(rctx, o, kubectl, filepath.Join(dir, fmt.Sprintf("shard-%d", i+1)), focus, fmt.Sprintf("%s/%d", phase, i+1), left)
			}()
		}
		wg.Wait()
		i0 += len(w)
	}
	run.Seconds = time.Since(run.Started).Seconds()
	if cov != nil {
		run.Namespaces, run.NotEnrolled = cov.Stop()
		if len(run.NotEnrolled) > 0 {
			errs = append(errs, fmt.Errorf("%d namespaces of the e2e framework were not enrolled (their specs ran on plain kube-proxy): %s", len(run.NotEnrolled), strings.Join(run.NotEnrolled, ", ")))
		}
	}
	for _, c := range codes {
		if c != 0 && run.ExitCode == 0 {
			run.ExitCode = c
		}
	}
	logf("phase %s: e2e.test exit %v after %.0fs", phase, codes, run.Seconds)
	err = errors.Join(errs...)
	if werr := specs.WritePhase(o.artifacts, run); werr != nil {
		return errors.Join(err, werr)
	}
	if err != nil {
		return fmt.Errorf("phase %s: %w", phase, err)
	}
	return nil
}

// shard runs e2e.test once with focus into dir and returns its exit code
// (-1 when it could not run, with the error).
func shard(ctx context.Context, o options, kubectl, dir, focus, label string, timeout time.Duration) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, err
	}
	log, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		return -1, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, o.e2eTest,
		"--kubeconfig="+o.kubeconfig, "--provider=skeleton", "--kubectl-path="+kubectl,
		"--report-dir="+dir, "--dump-logs-on-failure=false",
		"--ginkgo.focus="+focus, "--ginkgo.v", "--ginkgo.no-color",
		"--ginkgo.timeout="+timeout.Round(time.Second).String())
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(log, pw), io.MultiWriter(log, pw)
	done := make(chan struct{})
	go func() { progress(pr, label); close(done) }()
	err = cmd.Run()
	_ = pw.Close()
	<-done
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode(), nil
	} else if err != nil {
		return -1, fmt.Errorf("e2e.test: %w", err)
	}
	return 0, nil
}

// progress prints each finished spec (Ginkgo -v prints its name first, its
// result line "• [12.3 seconds]", "• [FAILED] …", "S [SKIPPED] …" last) and
// Ginkgo's summary.
func progress(r io.Reader, phase string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, specs.Prefix):
			name = l
		case name != "" && (strings.HasPrefix(l, "• [") || strings.HasPrefix(l, "S [") || strings.HasPrefix(l, "P [")):
			logf("phase %s: %s %s", phase, strings.TrimSpace(l), name)
			name = ""
		case strings.HasPrefix(l, "Ran "), strings.HasPrefix(l, "FAIL!"), strings.HasPrefix(l, "SUCCESS!"):
			logf("phase %s: %s", phase, l)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}
