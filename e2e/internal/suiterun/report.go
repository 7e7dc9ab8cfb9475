package suiterun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// Report renders the artifacts' report.md and report.html with e2e/cmd/report and writes
// the one-screen verdict table to out. failure, when set, is stated in the report (a run
// interrupted, a step outside the suite that failed). Its result is the report's verdict:
// nil passed; ErrNotPassed; any other error: the evidence could not be read.
func Report(ctx context.Context, reportBin, artifacts, failure string, out io.Writer) error {
	args := []string{"-dir", artifacts, "-summary"}
	if failure != "" {
		args = append(args, "-failure", failure)
	}
	cmd := exec.CommandContext(ctx, reportBin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return ErrNotPassed
	default:
		return fmt.Errorf("rendering the report of %s: %w", artifacts, err)
	}
}

// ErrNotPassed: the report's verdict is not passed (a selected leg failed, proved nothing or
// did not run, or the run failed outside the legs).
var ErrNotPassed = errors.New("the run did not pass")
