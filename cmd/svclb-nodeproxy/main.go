// Command svclb-nodeproxy is svclb's built-in xDS L4 node proxy, used in the
// svclb-node DaemonSet's proxy container where Envoy is not available.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aether-mesh/svclb/nodeproxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		os.Exit(2) // the flag package printed why
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeproxy.New(o).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "svclb-nodeproxy:", err)
		os.Exit(1)
	}
}

// parseFlags turns the command line into the proxy's Options.
func parseFlags(args []string) (nodeproxy.Options, error) {
	var o nodeproxy.Options
	fs := flag.NewFlagSet("svclb-nodeproxy", flag.ContinueOnError)
	fs.StringVar(&o.XDSSocket, "xds-socket", contract.XDSSocket, "the agent's xDS/ALS unix socket (bootstrap cluster "+contract.XDSCluster+")")
	fs.StringVar(&o.NodeID, "node-id", "", "xDS node id; default "+contract.NodeID("$NODE_NAME"))
	fs.StringVar(&o.NodeCluster, "node-cluster", contract.NodeCluster, "xDS node cluster")
	fs.StringVar(&o.AdminAddr, "admin", fmt.Sprintf("127.0.0.1:%d", contract.ProxyAdminPort), "admin address (/stats, /listeners, /ready, /config_dump); empty disables")
	// Envoy's --drain-time-s (source/server/options_impl.cc, default 600).
	drainTimeS := fs.Uint("drain-time-s", uint(nodeproxy.DefaultDrainTime/time.Second),
		"seconds connections on a filter chain changed or removed by an LDS update keep running before they are closed (Envoy's --drain-time-s)")
	// Envoy's bootstrap carries the same limit (fixtures/envoy).
	fs.Int64Var(&o.MaxDownstreamConnections, "max-downstream-connections", contract.ProxyMaxDownstreamConnections,
		"downstream connections of all listeners together; one over it is closed at accept (Envoy's global_downstream_max_connections); 0: no limit")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve Go's /debug/pprof/ on the admin address (which must then be loopback)")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.Pprof {
		if err := loopbackOnly(o.AdminAddr); err != nil {
			fmt.Fprintln(fs.Output(), err) // main exits without printing
			return o, err
		}
	}
	if o.MaxDownstreamConnections < 0 {
		err := fmt.Errorf("-max-downstream-connections=%d: want 0 (no limit) or more", o.MaxDownstreamConnections)
		fmt.Fprintln(fs.Output(), err) // main exits without printing
		return o, err
	}
	o.DrainTime = drainTime(*drainTimeS)
	if o.NodeID == "" {
		o.NodeID = contract.NodeID(os.Getenv("NODE_NAME"))
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return o, nil
}

// loopbackOnly refuses -pprof on an admin address reachable from off the
// node: a profile shows what the proxy is doing, and a pod could ask for one.
func loopbackOnly(admin string) error {
	host, _, err := net.SplitHostPort(admin)
	if err != nil {
		return fmt.Errorf("-pprof needs -admin on a loopback address, have %q: %w", admin, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return fmt.Errorf("-pprof needs -admin on a loopback address, have %q", admin)
	}
	return nil
}

// drainTime maps --drain-time-s to Options.DrainTime, whose 0 is the default
// and whose negative values are Envoy's 0 (close at the update).
func drainTime(s uint) time.Duration {
	if s == 0 {
		return -1
	}
	return time.Duration(s) * time.Second
}
