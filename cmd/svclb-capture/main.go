// Command svclb-capture is the init container of a meshed pod: it installs the
// capture rules in the pod's network namespace and then blocks until the node
// proxy's capture listener exists there, so the app never sends first.
//
// -node-addrs names the node's own addresses, which the capture leaves alone
// (capture.Config.NodeAddrs); the pod spec passes the downward API's
// status.hostIPs. A value that does not parse stops it before anything is
// installed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aether-mesh/svclb/internal/capture"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stderr))
}

// cli runs the command with args and returns its exit status: 2 for bad flags, 1 for a failure.
func cli(args []string, stderr io.Writer) int {
	cfg := capture.DefaultConfig()
	fs := flag.NewFlagSet("svclb-capture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Uint("port", uint(cfg.Port), "capture listener port")
	wait := fs.Bool("wait", true, "block until a socket listens on -port in this netns")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up waiting for the listener after this long")
	uninstall := fs.Bool("uninstall", false, "remove the capture rules instead of installing them")
	fs.StringVar(&cfg.NetNSPath, "netns", "", "network namespace file to program (default: this process's)")
	fs.Func("node-addrs", "the node's own addresses, comma-separated as the downward API's status.hostIPs "+
		"(IPv6 entries skipped): TCP to them is not captured", func(s string) error {
		addrs, err := capture.ParseNodeAddrs(s)
		cfg.NodeAddrs = addrs
		return err
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "svclb-capture: unexpected arguments %q\n", fs.Args())
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := run(cfg, *port, *wait, *uninstall, *timeout, log); err != nil {
		log.Error("svclb-capture failed", "err", err)
		return 1
	}
	return 0
}

func run(cfg capture.Config, port uint, wait, uninstall bool, timeout time.Duration, log *slog.Logger) error {
	if port == 0 || port > 65535 {
		return fmt.Errorf("-port %d out of range", port)
	}
	cfg.Port = uint16(port)
	if uninstall {
		return capture.Uninstall(cfg)
	}
	if wait && cfg.NetNSPath != "" {
		return fmt.Errorf("-wait must run inside the namespace it waits in; use -wait=false with -netns")
	}
	if err := capture.Install(cfg); err != nil {
		return err
	}
	log.Info("capture installed", "port", cfg.Port, "mark", fmt.Sprintf("%#x", cfg.Mark), "table", capture.TableName,
		"nodeAddrs", cfg.NodeAddrs)
	if !wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return capture.WaitForListener(ctx, cfg.Port, 250*time.Millisecond, log)
}
