package loopget

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const (
	// Timeout bounds one read: every page answers in well under a second, the rest is for a
	// loaded node.
	Timeout = 20 * time.Second
	// MaxBody is the largest page read; the largest, an agent's /status with every pending
	// on-demand name, is a few MiB.
	MaxBody = 64 << 20
)

// Get fetches path from the server at addr (host:port) and returns the body of a 200.
// It follows no redirect and uses no proxy from the environment.
func Get(ctx context.Context, addr, path string) ([]byte, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path %q does not start with /", path)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s%s: %w", addr, path, err)
	}
	c := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s%s: %w", addr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s%s: body: %w", addr, path, err)
	}
	if len(b) > MaxBody {
		return nil, fmt.Errorf("GET %s%s: body over %d bytes", addr, path, MaxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %s: %.200s", addr, path, resp.Status, b)
	}
	return b, nil
}

// Main is the `get` command of the daemon name, whose HTTP listens on defaultAddr unless
// -addr says otherwise: it writes the page's body to stdout and returns the exit code (0; 1
// when the read failed; 2 for bad arguments).
func Main(ctx context.Context, name, defaultAddr string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name+" get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s get [-addr host:port] PATH\n\nwrites the body of PATH (/status, /metrics, /healthz) of this node's %s\n", name, name)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", defaultAddr, "the address "+name+" serves HTTP on (its --http or --listen)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	b, err := Get(ctx, *addr, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "%s get: %v\n", name, err)
		return 1
	}
	if _, err := stdout.Write(b); err != nil {
		fmt.Fprintf(stderr, "%s get: %v\n", name, err)
		return 1
	}
	return 0
}
