package suiterun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the repository's Go module: Repo finds the root by it.
const Module = "github.com/aether-mesh/svclb"

// Binaries are the suite's two programs and how to get them.
type Binaries struct {
	// Repo is the repository root (the e2e package and e2e/cmd/report are built from it;
	// the suite binary runs in <Repo>/e2e, as go test would).
	Repo string
	// Go is the go command (with flags, space-separated) that builds them.
	Go string
	// Suite and Report are the binaries' paths; "" builds them into <Repo>/_output.
	Suite, Report string
	// Log receives the build commands' output.
	Log io.Writer
}

// FindRepo walks up from dir to the directory whose go.mod declares Module.
func FindRepo(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module "+Module+"\n") {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no repository of %s at or above %s: run svclb-e2e from the repository (or --repo)", Module, dir)
		}
		d = parent
	}
}

// SuiteBinary is the suite binary: Suite when given (it must exist), else built with go test -c.
func (b *Binaries) SuiteBinary(ctx context.Context) (string, error) {
	if b.Suite != "" {
		return b.Suite, exists(b.Suite, "--suite-binary")
	}
	out := filepath.Join(b.Repo, "_output", "e2e.test")
	return out, b.build(ctx, "test", "-c", "-o", out, "./e2e/")
}

// ReportBinary is e2e/cmd/report: Report when given, else built with go build.
func (b *Binaries) ReportBinary(ctx context.Context) (string, error) {
	if b.Report != "" {
		return b.Report, exists(b.Report, "--report-binary")
	}
	out := filepath.Join(b.Repo, "_output", "e2e-report")
	return out, b.build(ctx, "build", "-o", out, "./e2e/cmd/report")
}

func (b *Binaries) build(ctx context.Context, args ...string) error {
	goCmd := strings.Fields(b.Go)
	if len(goCmd) == 0 {
		goCmd = []string{"go"}
	}
	cmd := exec.CommandContext(ctx, goCmd[0], append(goCmd[1:], args...)...)
	cmd.Dir = b.Repo
	cmd.Stdout, cmd.Stderr = b.Log, b.Log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", b.Go, strings.Join(args, " "), err)
	}
	return nil
}

func exists(path, flag string) error {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s %s: no such file", flag, path)
		}
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}
