// Command svclb-nodeproxy is svclb's built-in xDS L4 node proxy, used in the
// svclb-node DaemonSet's proxy container where Envoy is not available.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/aether-mesh/svclb/nodeproxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func main() {
	var o nodeproxy.Options
	flag.StringVar(&o.XDSSocket, "xds-socket", contract.XDSSocket, "the agent's xDS/ALS unix socket (bootstrap cluster "+contract.XDSCluster+")")
	flag.StringVar(&o.NodeID, "node-id", "", "xDS node id; default "+contract.NodeID("$NODE_NAME"))
	flag.StringVar(&o.NodeCluster, "node-cluster", contract.NodeCluster, "xDS node cluster")
	flag.StringVar(&o.AdminAddr, "admin", fmt.Sprintf("127.0.0.1:%d", contract.ProxyAdminPort), "admin address (/stats, /listeners, /ready, /config_dump); empty disables")
	verbose := flag.Bool("v", false, "debug logging")
	flag.Parse()
	if o.NodeID == "" {
		o.NodeID = contract.NodeID(os.Getenv("NODE_NAME"))
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeproxy.New(o).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "svclb-nodeproxy:", err)
		os.Exit(1)
	}
}
