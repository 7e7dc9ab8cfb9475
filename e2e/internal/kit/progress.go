// Progress: the suites' progress lines.

package kit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ProgressFile is the file in a suite's artifacts directory that gets every progress line;
// run.sh's own lines (kit.sh) go there too.
const ProgressFile = "progress.log"

// Progress prints a suite's progress: "[<suite> <seconds since start>s] <text>", one line at a
// time, on stderr and appended to ProgressFile. Long steps must show they are alive; a step
// that succeeds says nothing more than that it started (Step).
type Progress struct {
	suite string
	start time.Time

	mu   sync.Mutex
	out  io.Writer
	file *os.File // nil: stderr only
}

// NewProgress prints suite's progress with the time since start; dir, when not empty, is the
// artifacts directory ProgressFile is appended to (created if need be). A file that cannot
// be opened is said once on stderr and left out.
func NewProgress(suite string, start time.Time, dir string) *Progress {
	p := &Progress{suite: suite, start: start, out: os.Stderr}
	if dir == "" {
		return p
	}
	f, err := openProgressFile(dir)
	if err != nil {
		p.Printf("progress lines on stderr only: %v", err)
		return p
	}
	p.file = f
	return p
}

func openProgressFile(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, ProgressFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

// Printf prints one progress line.
func (p *Progress) Printf(format string, args ...any) {
	line := fmt.Sprintf("[%s %7.1fs] %s\n", p.suite, time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.out, line)
	if p.file != nil {
		_, _ = p.file.WriteString(line)
	}
}

// Step runs f as the step name: a line when it starts and, when it fails, one with how long it
// took and why. It returns how long f took and its error wrapped with name.
func (p *Progress) Step(name string, f func() error) (time.Duration, error) {
	p.Printf("%s", name)
	t0 := time.Now()
	err := f()
	d := time.Since(t0)
	if err != nil {
		p.Printf("%s FAILED after %s: %v", name, d.Round(100*time.Millisecond), err)
		return d, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}
