// Package scale measures the agent against kube-proxy at the same scale (issue 5: "agent RSS ≤
// kube-proxy's at 10k Services / 100k endpoints").
//
// TestRSS (gated by SVCLB_SCALE=1, `make scale`) starts an envtest apiserver, fills it with
// ClusterIP Services and one EndpointSlice each, then runs a real kube-proxy (nftables mode, in a
// throwaway network namespace), the svclb-agent binary and the built-in node proxy connected to it
// as child processes, waits until each has programmed everything, and prints VmRSS/VmHWM of each
// and the agent/kube-proxy ratio. The helpers here (object generation, /proc reading, the
// kubeconfig and the apiserver forwarder) are small and unit-tested in the default run.
package scale
