// Package httpserve is how every HTTP server of svclb serves: the agent's /metrics, /status
// and /healthz, the guard's, the built-in proxy's admin and the echo workload's health checks.
//
// Each server gets the same Limits (Defaults, from pkg/contract): how long a client may take
// to send its request's headers and body, how long the answer may take, how long an idle
// keep-alive connection is kept, how large the headers may be, and how many connections one
// listener serves at once (golang.org/x/net/netutil.LimitListener: more wait in the kernel's
// accept queue until one ends). A client that opens connections and sends nothing, or keeps
// them idle, holds each for a bounded time and never more than the cap of them.
//
//	limits.go       Limits, Defaults
//	serve.go        Listen, Limit, Server, Serve
//	addr.go         LoopbackAddr: the agent's and the guard's listen address
//	httpservetest/  CheckCap: a running server holds no more connections than its cap
package httpserve
