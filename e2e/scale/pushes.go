package scale

import (
	"fmt"

	scrape "github.com/aether-mesh/svclb/fixtures/metrics" // rss_test.go has a metrics func
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Pushes is the agent's push-duration histogram (contract.MetricPushDuration) at one scrape:
// how many rebuilds it handed to its xDS server and their total duration in seconds.
type Pushes struct {
	Count   uint64
	Seconds float64
}

// ParsePushes reads Pushes from a /metrics body of the agent (Prometheus text format).
func ParsePushes(body []byte) (Pushes, error) {
	m, err := scrape.Parse(body)
	if err != nil {
		return Pushes{}, err
	}
	mf, ok := m[contract.MetricPushDuration]
	if !ok || len(mf.GetMetric()) == 0 {
		return Pushes{}, fmt.Errorf("agent metrics: no %s", contract.MetricPushDuration)
	}
	var p Pushes
	for _, x := range mf.GetMetric() {
		h := x.GetHistogram()
		if h == nil {
			return Pushes{}, fmt.Errorf("agent metrics: %s is not a histogram", contract.MetricPushDuration)
		}
		p.Count += h.GetSampleCount()
		p.Seconds += h.GetSampleSum()
	}
	return p, nil
}

// goHeapInuse is client_golang's Go collector's name for runtime/metrics' heap in use (spans with
// at least one object), which the agent's registry exports.
const goHeapInuse = "go_memstats_heap_inuse_bytes"

// ParseHeapInuse reads the agent's Go heap in use, in bytes, from a /metrics body: with no pprof
// in the agent, what of its VmRSS is live heap.
func ParseHeapInuse(body []byte) (uint64, error) {
	m, err := scrape.Parse(body)
	if err != nil {
		return 0, err
	}
	if _, ok := m[goHeapInuse]; !ok {
		return 0, fmt.Errorf("agent metrics: no %s", goHeapInuse)
	}
	return uint64(m.Sum(goHeapInuse, nil)), nil
}

// Sub is p minus an earlier scrape: the pushes made in between.
func (p Pushes) Sub(earlier Pushes) Pushes {
	return Pushes{Count: p.Count - earlier.Count, Seconds: p.Seconds - earlier.Seconds}
}
