// Package loopget reads a daemon's HTTP that listens on the node's loopback only: the `get`
// command of svclb-agent and svclb-guard. Both run on hostNetwork and bind 127.0.0.1
// (internal/httpserve.LoopbackAddr), so no pod reaches their /status or /metrics; a reader
// runs the daemon's own binary in its container (kubectl exec … /svclb-agent get /status),
// which the apiserver authorizes as pods/exec. The images are FROM scratch: the binary is the
// only client there is.
//
//	loopget.go   Get, Main
package loopget
