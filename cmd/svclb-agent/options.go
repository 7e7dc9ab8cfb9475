package main

import (
	"flag"
	"fmt"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// options is the agent's command line: the agent.Config the flags fill, and the flags that
// are parsed into it afterwards.
type options struct {
	cfg             agent.Config
	rng, level, cds string
}

// define puts the flags on fs. getenv gives the default the DaemonSet sets in the
// environment: the node's name.
func (o *options) define(fs *flag.FlagSet, getenv func(string) string) {
	cfg := &o.cfg
	// The ConfigMap whose keys override the phase and CDS defaults below.
	cm := contract.Namespace + "/" + contract.AgentConfigMap
	fs.StringVar(&cfg.NodeName, "node-name", getenv("NODE_NAME"), "node this agent serves (env NODE_NAME)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig path; empty: in-cluster")
	fs.StringVar(&cfg.XDSSocket, "xds-socket", contract.XDSSocket, "unix socket for delta ADS and ALS")
	// Loopback, as kube-proxy's metrics: on hostNetwork any other address is the node's, which
	// every pod reaches. Read it with "svclb-agent get" in the container.
	fs.StringVar(&cfg.HTTPAddr, "http", httpserve.LoopbackAddr(contract.AgentPort),
		"address for /metrics, /healthz and /status (port 0: a free port, logged); any but loopback lets every pod that reaches it read them")
	fs.StringVar(&cfg.NetnsDir, "netns-dir", contract.NetnsDir, "directory of pod network namespace files")
	fs.BoolVar(&cfg.Phase1, "phase1", true, fmt.Sprintf("default for Phase 1 (%s clusters) until ConfigMap %s key %s says otherwise", contract.ClusterPrefix, cm, contract.KeyPhase1))
	fs.BoolVar(&cfg.Phase2, "phase2", true, fmt.Sprintf("default for Phase 2 (refusals) until ConfigMap %s key %s says otherwise", cm, contract.KeyPhase2))
	fs.StringVar(&o.rng, "service-range", "", "comma-separated IPv4 prefixes replacing the ServiceCIDR range")
	fs.DurationVar(&cfg.Debounce, "debounce", 0, "coalesce changes for this long before a push (default 50ms)")
	fs.StringVar(&o.cds, "cds", string(agentstatus.CDSProactive), fmt.Sprintf("default CDS mode, %s or %s, until ConfigMap %s key %s says otherwise", agentstatus.CDSProactive, agentstatus.CDSOnDemand, cm, contract.KeyCDS))
	fs.IntVar(&cfg.OnDemandMax, "on-demand-max", agent.DefaultOnDemandMax, "most cluster names admitted on demand; beyond it a request is refused (over-cap)")
	fs.StringVar(&cfg.DemandFile, "demand-file", contract.DemandFile, "where admitted on-demand names persist across restarts; empty: not persisted")
	fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.EnrollSocket, "enroll-socket", "", fmt.Sprintf("serve the svclb-cni plugin on this unix socket (the node DaemonSet: %s); empty: no CNI enrollment", contract.EnrollSocket))
	fs.StringVar(&cfg.EnrollFile, "enroll-file", contract.EnrollFile, "where the pods the CNI plugin enrolled persist across restarts; empty: not persisted")
	fs.StringVar(&cfg.EnrollNamespacesFile, "enroll-namespaces-file", contract.EnrollNamespacesFile,
		"where the namespaces the selector enrolls are published for the CNI plugin, which starts the pods of the others without the agent; empty: not published")
}
