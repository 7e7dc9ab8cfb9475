// Command svclb-agent is the svclb node agent; see package agent.
//
//	svclb-agent [flags]          run the agent
//	svclb-agent get [-addr] PATH write the body of PATH of this node's agent (internal/loopget)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/internal/loopget"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(loopget.Main(context.Background(), "svclb-agent", httpserve.LoopbackAddr(contract.AgentPort), os.Args[2:], os.Stdout, os.Stderr))
	}
	var o options
	o.define(flag.CommandLine, os.Getenv)
	flag.Parse()
	cfg, rng, level, cds := o.cfg, o.rng, o.level, o.cds

	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintf(os.Stderr, "svclb-agent: -log-level: %v\n", err)
		os.Exit(2)
	}
	mode, err := agent.ParseCDSMode(cds)
	if err != nil {
		fmt.Fprintf(os.Stderr, "svclb-agent: -cds: %v\n", err)
		os.Exit(2)
	}
	cfg.CDSMode = mode
	if cfg.OnDemandMax <= 0 {
		fmt.Fprintf(os.Stderr, "svclb-agent: -on-demand-max: %d is not positive\n", cfg.OnDemandMax)
		os.Exit(2)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	for _, p := range strings.Split(rng, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "svclb-agent: -service-range: %v\n", err)
			os.Exit(2)
		}
		cfg.RangeOverride = append(cfg.RangeOverride, pfx)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		cfg.Logger.Error("agent failed", "error", err)
		os.Exit(1)
	}
}
