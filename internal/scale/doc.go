// Package scale measures the agent against kube-proxy at the same scale (issue 5: "agent RSS ≤
// kube-proxy's at 10k Services / 100k endpoints").
//
// TestRSS (gated by SVCLB_SCALE=1, `make scale`; SVCLB_SCALE_SERVICES and SVCLB_SCALE_ENDPOINTS
// change the size) starts an envtest apiserver, fills it with ClusterIP Services and one
// EndpointSlice of ready endpoints each, then runs, as child processes, a real kube-proxy
// (nftables mode, in a throwaway network namespace), the svclb-agent binary and the built-in node
// proxy connected to it. Each is started once every object exists (a node joining a big cluster)
// and waited for until it has programmed everything: kube-proxy's service-ips map and endpoint
// chains, the agent's /status, the node proxy's /config_dump. It prints VmRSS and VmHWM of each
// and the agent/kube-proxy ratio. The helpers (objects, /proc, kubeconfig, the apiserver
// forwarder) are unit-tested in the default run.
//
// Measured (2026-11-29, 2 shared cores, Go 1.26, kube-proxy v1.34.4, proactive CDS, one run;
// 10,000 Services × 10 endpoints, plus Service kubernetes):
//
//	process                      VmRSS MiB  VmHWM MiB  programmed in
//	kube-proxy (nftables)            258.4      430.6  3m59s
//	svclb-agent                      239.9      239.9  10s
//	svclb-nodeproxy (built-in)       212.0      231.7  44s
//
// agent/kube-proxy: VmRSS 0.93, VmHWM 0.56. The agent replaces kube-proxy's control plane only;
// the node proxy's memory is the data plane's, which for kube-proxy lives in the kernel's
// nftables (not in any RSS). Creating the objects took the apiserver 7m41s (43 objects/s, 8
// workers: each Service also allocates an IPAddress object).
package scale
