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
	"github.com/aether-mesh/svclb/pkg/contract"
)

func main() {
	var cfg agent.Config
	var rng, level, cds string
	// The ConfigMap whose keys override the phase and CDS defaults below.
	cm := contract.Namespace + "/" + contract.AgentConfigMap
	flag.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "node this agent serves (env NODE_NAME)")
	flag.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig path; empty: in-cluster")
	flag.StringVar(&cfg.XDSSocket, "xds-socket", contract.XDSSocket, "unix socket for delta ADS and ALS")
	flag.StringVar(&cfg.HTTPAddr, "http", fmt.Sprintf(":%d", contract.AgentPort), "address for /metrics, /healthz and /status (port 0: a free port, logged)")
	flag.StringVar(&cfg.NetnsDir, "netns-dir", contract.NetnsDir, "directory of pod network namespace files")
	flag.BoolVar(&cfg.Phase1, "phase1", true, fmt.Sprintf("default for Phase 1 (%s clusters) until ConfigMap %s key %s says otherwise", contract.ClusterPrefix, cm, contract.KeyPhase1))
	flag.BoolVar(&cfg.Phase2, "phase2", true, fmt.Sprintf("default for Phase 2 (refusals) until ConfigMap %s key %s says otherwise", cm, contract.KeyPhase2))
	flag.StringVar(&rng, "service-range", "", "comma-separated IPv4 prefixes replacing the ServiceCIDR range")
	flag.DurationVar(&cfg.Debounce, "debounce", 0, "coalesce changes for this long before a push (default 50ms)")
	flag.StringVar(&cds, "cds", string(agent.CDSProactive), fmt.Sprintf("default CDS mode, %s or %s, until ConfigMap %s key %s says otherwise", agent.CDSProactive, agent.CDSOnDemand, cm, contract.KeyCDS))
	flag.IntVar(&cfg.OnDemandMax, "on-demand-max", agent.DefaultOnDemandMax, "most cluster names admitted on demand; beyond it a request is refused (over-cap)")
	flag.StringVar(&cfg.DemandFile, "demand-file", contract.DemandFile, "where admitted on-demand names persist across restarts; empty: not persisted")
	flag.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	flag.StringVar(&cfg.EnrollSocket, "enroll-socket", "", fmt.Sprintf("serve the svclb-cni plugin on this unix socket (the node DaemonSet: %s); empty: no CNI enrollment", contract.EnrollSocket))
	flag.StringVar(&cfg.EnrollFile, "enroll-file", contract.EnrollFile, "where the pods the CNI plugin enrolled persist across restarts; empty: not persisted")
	flag.StringVar(&cfg.EnrollNamespacesFile, "enroll-namespaces-file", contract.EnrollNamespacesFile,
		"where the namespaces the selector enrolls are published for the CNI plugin, which starts the pods of the others without the agent; empty: not published")
	flag.Parse()

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
