// Command svclb-agent is the svclb node agent; see package agent.
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
)

func main() {
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
