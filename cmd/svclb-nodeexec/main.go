// Command svclb-nodeexec runs a command in its node's root: the container of the suites'
// node-access DaemonSet. See package github.com/aether-mesh/svclb/internal/nodeexec.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/aether-mesh/svclb/internal/nodeexec"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := nodeexec.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
