// Package scale measures the agent against kube-proxy at the same scale (the goal: agent RSS ≤
// kube-proxy's at 10k Services / 100k endpoints).
//
// TestRSS (gated by SVCLB_SCALE=1, `make scale`; SVCLB_SCALE_SERVICES and SVCLB_SCALE_ENDPOINTS
// change the size) starts an envtest apiserver, fills it with ClusterIP Services and one
// EndpointSlice of ready endpoints each, then runs, as child processes, a real kube-proxy
// (nftables mode, in a throwaway network namespace), the svclb-agent binary and the built-in node
// proxy connected to it. Each is started once every object exists (a node joining a big cluster)
// and waited for until it has programmed everything: kube-proxy's service-ips map and endpoint
// chains, the agent's /status, the node proxy's /stats. It prints VmRSS and VmHWM of each
// and the agent/kube-proxy ratio. The helpers (objects, /proc, kubeconfig, the apiserver
// forwarder) are unit-tested in the default run.
//
// TestGrowth (`make scale-growth`, SCALE_STEPS) is how that cost grows: the three run from an empty
// cluster while the Services are created in steps (1,000, 2,000, 5,000, 10,000). After each step it
// records the push time (the step's last Create until the node proxy's /stats show a cluster for
// every Service and none warming, polled every 250 ms), the agent's pushes and their total duration
// (its contract.MetricPushDuration histogram), VmRSS of all three, and with SVCLB_SCALE_PROFILE=1
// the node proxy's heap profile (the agent serves no pprof). It logs a table per step and rewrites
// scaleresult.GrowthFile in the perf results directory after each one. Its figures are in
// docs/perf.md, "How cost grows".
//
// TestHeld (`make scale-held`, HELD, CONNS, CONN_RATE) and TestOnDemand (`make scale-ondemand`,
// DEMANDED, FIRST, FIRST_RATE) measure connections rather than programming. Both serve one captured
// pod (podNet: a netns with internal/capture installed, linked into the agent's --netns-dir, so the
// agent gives it a capture listener the node proxy binds inside it) and Services whose endpoints
// are echo servers on the host end of the pod's veth. Each connection is timed from when it was due
// (OpenLoop: a fixed rate, open loop) to the echo of its first byte. TestHeld holds idle
// connections open through the proxy in steps (0, 100, 1,000) and records the new connections'
// p50/p99/p99.9 and the proxy's VmRSS and fds at each, in scaleresult.HeldFile. TestOnDemand starts
// the agent in on-demand CDS mode with a demand file of 10, then 5,000 Services, and times first
// connections to Services not yet demanded beside connections to demanded ones, in
// scaleresult.OnDemandFile (the results and their reader: package scaleresult; `make perf-report`
// renders all three). The three start from startRun (scalerun_test.go).
//
// Measured (2026-11-29, an x86_64 VM with 24 GiB and 2 shared, heavily loaded cores, Go 1.26,
// kube-proxy v1.34.4; 10,000 Services × 10 endpoints plus Service kubernetes; VmRSS / VmHWM in
// MiB, time to programmed):
//
//	process                         run 1                     run 2 (with on-demand CDS)
//	kube-proxy (nftables)           258.4 / 430.6  3m59s      417.1 / 439.4  3m24s
//	svclb-agent, proactive CDS      239.9 / 239.9  10s        248.1 / 248.1  13s
//	svclb-nodeproxy (built-in)      212.0 / 231.7  44s        188.6 / 188.6  23s
//	svclb-agent, on-demand, idle            -                 153.1 / 153.1  4s
//
// agent/kube-proxy VmHWM 0.56 in both runs; VmRSS 0.93 and 0.59 (kube-proxy's resident set after
// its peak depends on when the Go scavenger returned memory; its peak does not). kube-proxy's
// time is one full sync (179 s in run 2, kubeproxy_sync_full_proxy_rules_duration_seconds); the
// agent's one push took 6.3 s. The agent replaces kube-proxy's control plane only: the node
// proxy's memory is the data plane's, which for kube-proxy lives in the kernel's nftables (in no
// RSS), so agent+node proxy is about kube-proxy's peak (VmHWM 1.10 and 0.99). The node proxy's
// figure includes this harness polling its /stats (a multi-MB JSON) every 2 s. Creating
// the objects took the apiserver 7m41s and 6m13s (43 and 54 objects/s, 8 workers: each Service
// also allocates an IPAddress object).
package scale
