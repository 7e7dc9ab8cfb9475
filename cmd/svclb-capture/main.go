// Command svclb-capture is the init container of a meshed pod: it installs the
// capture rules in the pod's network namespace and then blocks until the node
// proxy's capture listener exists there, so the app never sends first.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aether-mesh/svclb/internal/capture"
)

func main() {
	cfg := capture.DefaultConfig()
	port := flag.Uint("port", uint(cfg.Port), "capture listener port")
	wait := flag.Bool("wait", true, "block until a socket listens on -port in this netns")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up waiting for the listener after this long")
	uninstall := flag.Bool("uninstall", false, "remove the capture rules instead of installing them")
	flag.StringVar(&cfg.NetNSPath, "netns", "", "network namespace file to program (default: this process's)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg, *port, *wait, *uninstall, *timeout, log); err != nil {
		log.Error("svclb-capture failed", "err", err)
		os.Exit(1)
	}
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
	log.Info("capture installed", "port", cfg.Port, "mark", fmt.Sprintf("%#x", cfg.Mark), "table", capture.TableName)
	if !wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return capture.WaitForListener(ctx, cfg.Port, 250*time.Millisecond, log)
}
