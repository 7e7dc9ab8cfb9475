package suiterun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Defaults of a Runner's signal path.
const (
	// DefaultGrace is how long the suite has, after the forwarded signal, to stop its leg,
	// run its cleanup and write its reports (Ginkgo's interrupt) before it is killed.
	DefaultGrace = 3 * time.Minute
	// signalEcho: signals within this of the first are the same interrupt (a terminal's
	// Ctrl-C reaches every process of the foreground group: make, e2e/run.sh, which forwards
	// it too, and svclb-e2e) and are not forwarded again. Ginkgo reads a second interrupt as
	// "stop now, no reports".
	signalEcho = 5 * time.Second
)

// Runner runs the suite binary once.
type Runner struct {
	// Suite is the suite binary; Dir its working directory (<repo>/e2e).
	Suite, Dir string
	Config     Config
	// Out receives the suite's output (and e2e.log in the artifacts a copy).
	Out io.Writer
	// Signals are the signals to act on (the command's signal.Notify of SIGINT and SIGTERM).
	Signals <-chan os.Signal
	// Grace: DefaultGrace when zero.
	Grace time.Duration
	// Restore puts the cluster back after an interrupted run: the guard removed and
	// kube-proxy's cuts restored (uninstall.RestoreGuard).
	Restore func(ctx context.Context, log io.Writer) error
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the suite binary's (-1: killed by a signal).
	ExitCode int
	// Interrupted is the first signal received, nil when none was.
	Interrupted os.Signal
	// Killed: the suite outlived its Grace after the signal and was killed.
	Killed bool
	// RestoreErr is Restore's outcome after an interrupt (nil: restored, or not interrupted).
	RestoreErr error
	Duration   time.Duration
}

// Failure is what the report states about a run that did not end on its own, "" otherwise.
func (r Result) Failure() string {
	if r.Interrupted == nil {
		return ""
	}
	what := "interrupted by " + SignalName(r.Interrupted)
	if r.Killed {
		what += ": the suite did not stop within its grace period and was killed"
	}
	if r.RestoreErr != nil {
		return what + "; restoring the cluster FAILED: " + r.RestoreErr.Error()
	}
	return what + "; the cluster was restored (guard removed, kube-proxy's cuts put back)"
}

// Run starts the suite and waits for it. A signal is forwarded once to the suite, which
// runs in its own process group so that a terminal's Ctrl-C reaches it only so; after it has
// exited (or been killed once Grace passed) Restore runs.
func (r *Runner) Run(ctx context.Context) (Result, error) {
	grace := r.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	log, err := os.Create(filepath.Join(r.Config.Artifacts, "e2e.log"))
	if err != nil {
		return Result{}, err
	}
	defer log.Close()
	out := io.MultiWriter(r.Out, log)
	cmd := exec.Command(r.Suite, r.Config.Args()...)
	cmd.Dir = r.Dir
	cmd.Env = r.Config.Env(os.Environ())
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start the suite %s: %w", r.Suite, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var res Result
	var first time.Time
	var kill <-chan time.Time
	var waitErr error
wait:
	for {
		select {
		case waitErr = <-done:
			break wait
		case sig := <-r.Signals:
			switch {
			case res.Interrupted == nil:
				res.Interrupted, first = sig, time.Now()
				fmt.Fprintf(out, "svclb-e2e: %s: forwarding it to the suite once; it has %s to stop and write its reports, then the cluster is restored\n", SignalName(sig), grace)
				_ = cmd.Process.Signal(sig)
				kill = time.After(grace)
			case time.Since(first) < signalEcho:
				// The same interrupt, delivered again: already forwarded.
			default:
				fmt.Fprintf(out, "svclb-e2e: %s again: killing the suite now; the cluster is still restored\n", SignalName(sig))
				res.Killed = true
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		case <-kill:
			fmt.Fprintf(out, "svclb-e2e: the suite is still running %s after %s: killing it\n", grace, SignalName(res.Interrupted))
			res.Killed = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			kill = nil
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return res, fmt.Errorf("%w: the suite killed (%v)", ctx.Err(), <-done)
		}
	}
	res.Duration = time.Since(start)
	res.ExitCode = 0
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		return res, fmt.Errorf("the suite: %w", waitErr)
	}
	if res.Interrupted != nil && r.Restore != nil {
		fmt.Fprintln(out, "svclb-e2e: restoring the cluster: the guard removed, kube-proxy's cuts put back")
		// Its own context: the run's may be what was interrupted.
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		res.RestoreErr = r.Restore(rctx, out)
		cancel()
		if res.RestoreErr != nil {
			fmt.Fprintf(out, "svclb-e2e: restoring the cluster FAILED: %v\n", res.RestoreErr)
		}
	}
	return res, nil
}

// SignalName is SIGINT or SIGTERM, as a shell names them (os.Signal's String is "interrupt").
func SignalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}
