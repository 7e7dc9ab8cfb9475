package scaleresult

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HeldFile is the file TestHeld writes into the perf results directory (beside GrowthFile),
// rewritten after every level so that a run cut short keeps the levels it finished.
const HeldFile = "held.json"

// Held is "connection latency under held connections": one run of TestHeld, the node proxy
// serving one Service to a captured pod while idle long-lived connections are held open
// through it in steps, and new connections are opened at a fixed rate at each step.
type Held struct {
	RunInfo
	// Endpoints is how many echo servers back the Service; Rate the new connections per
	// second (open loop), Conns how many at each level, Timeout each one's bound.
	Endpoints int           `json:"endpoints"`
	Rate      float64       `json:"rate"`
	Conns     int           `json:"conns"`
	Timeout   time.Duration `json:"timeout"`
	Levels    []HeldLevel   `json:"levels"`
}

// HeldLevel is the figures with Held idle connections open through the proxy.
type HeldLevel struct {
	Held int `json:"held"`
	// Active is the proxy's upstream connections (its clusters' upstream_cx_active) once the
	// held ones were open, before the new ones: that they really are held through it.
	Active int64 `json:"active"`
	// Latency is each new connection's setup to first byte (connect, one byte written, its
	// echo read), from when it was due; Errors the ones that failed (first few in
	// ErrorSamples); Lag how late the generator started one at worst.
	Latency      Percentiles   `json:"latency"`
	Errors       int           `json:"errors"`
	ErrorSamples []string      `json:"errorSamples,omitempty"`
	Lag          time.Duration `json:"lag"`
	// Direct is the same for connections made in the same window at the same rate from the
	// host's namespace straight to the echo servers (no capture, no proxy, no namespace
	// switch): the machine's own share of the tail.
	Direct       Percentiles `json:"direct"`
	DirectErrors int         `json:"directErrors"`
	// NodeProxy is the proxy's resident memory and FDs its open file descriptors with the
	// held connections open, before the new ones; CPUSeconds what it used while serving them.
	NodeProxy    Memory     `json:"nodeProxy"`
	NodeProxyFDs int        `json:"nodeProxyFDs"`
	CPUSeconds   float64    `json:"cpuSeconds"`
	LoadAfter    [3]float64 `json:"loadAfter"`
}

// Table renders the levels as the test logs them: latencies in ms, the p99 and p99.9 against the
// first level's, the direct connections' ("d"), the proxy's VmRSS in MiB, its fds, and its CPU
// per new connection in ms.
func (h *Held) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6s %6s %6s %6s %8s %8s %8s %8s %8s %9s %9s %8s %8s %8s %9s %6s %8s %6s\n", "held", "active", "conns", "errors",
		"p50 ms", "p99 ms", "p99.9 ms", "max ms", "lag ms", "p99/p99₀", "p999/₀", "d p50", "d p99", "d p99.9", "proxy MiB", "fds", "cpu ms/c", "load1")
	for _, l := range h.Levels {
		b0 := h.Levels[0].Latency
		p99, p999 := durRatio(l.Latency.P99, b0.P99), durRatio(l.Latency.P999, b0.P999)
		cpu := "–"
		if n := l.Latency.N + l.Errors; n > 0 {
			cpu = strconv.FormatFloat(l.CPUSeconds*1000/float64(n), 'f', 3, 64)
		}
		fmt.Fprintf(&b, "%6d %6d %6d %6d %8s %8s %8s %8s %8s %9s %9s %8s %8s %8s %9s %6d %8s %6.2f\n", l.Held, l.Active, l.Latency.N+l.Errors, l.Errors,
			ms(l.Latency.P50), ms(l.Latency.P99), ms(l.Latency.P999), ms(l.Latency.Max), ms(l.Lag), p99, p999,
			ms(l.Direct.P50), ms(l.Direct.P99), ms(l.Direct.P999), MiB(l.NodeProxy.RSS), l.NodeProxyFDs, cpu, l.LoadAfter[0])
	}
	return b.String()
}

// ms formats d in milliseconds with three decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// durRatio is a/b with two decimals, "–" when b is 0.
func durRatio(a, b time.Duration) string {
	if b == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64)
}

// Write writes h as indented JSON to dir/HeldFile.
func (h *Held) Write(dir string) error { return writeResult(dir, HeldFile, h) }
