// Command svclb-guard deletes, and keeps deleting, kube-proxy's nftables
// objects of the Services labelled svclb.dev/kube-proxy=deleted. See
// package github.com/aether-mesh/svclb/pkg/kubeproxyguard/guardcmd.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/aether-mesh/svclb/pkg/kubeproxyguard/guardcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := guardcmd.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
