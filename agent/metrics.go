// Metrics: the agent's Prometheus series.

package agent

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

type metrics struct {
	version, clusters, endpoints, listeners, resources prometheus.Gauge
	rangeKnown                                         prometheus.Gauge
	push, programming                                  prometheus.Histogram
	rejected                                           prometheus.Counter

	// On-demand CDS (docs/architecture.md, "On-demand CDS mode").
	odAdmitted            prometheus.Counter
	odRefused             *prometheus.CounterVec
	odDemanded, odPending prometheus.Gauge
	odForgotten           prometheus.Counter
	odForgottenAddrs      prometheus.Gauge
	logSuppressed         prometheus.Counter // the on-demand refusal summaries not written

	settingsErrors *prometheus.GaugeVec // by ConfigMap key (settingsErrorKeys)
}

// settingsErrorKeys are the values of contract.MetricSettingsErrors's label: the keys the agent
// reads, and one for all the keys it does not know.
var settingsErrorKeys = append(slices.Clone(settingsKeys), contract.SettingsKeyUnknown)

// setSettingsErrors sets contract.MetricSettingsErrors from the ConfigMap's errors.
func (m *metrics) setSettingsErrors(errs []agentstatus.SettingError) {
	n := map[string]int{}
	for _, e := range errs {
		k := e.Key
		if !slices.Contains(settingsKeys, k) {
			k = contract.SettingsKeyUnknown
		}
		n[k]++
	}
	for _, k := range settingsErrorKeys {
		m.settingsErrors.WithLabelValues(k).Set(float64(n[k]))
	}
}

// programmingBuckets are kube-proxy's for kubeproxy_network_programming_duration_seconds, so
// the two histograms compare bucket for bucket.
func programmingBuckets() []float64 {
	var b []float64
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &metrics{
		version:   g(contract.MetricSnapshotVersion, "Version of the resources last published to the node proxy."),
		clusters:  g(contract.MetricClusters, "Clusters published (svc: clusters and passthrough)."),
		endpoints: g(contract.MetricEndpoints, "Endpoints published across all svc: clusters."),
		listeners: g(contract.MetricListeners, "Capture listeners published (one per captured pod with a known netns)."),
		resources: g(contract.MetricSnapshotResources, "Resources published: listeners, clusters and load assignments."),
		push: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    contract.MetricPushDuration,
			Help:    "From the start of a rebuild to the change handed to the xDS server.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    contract.MetricProgrammingDuration,
			Help:    "From an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the push (like kubeproxy_network_programming_duration_seconds).",
			Buckets: programmingBuckets(),
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: contract.MetricSnapshotRejected,
			Help: "Rebuilds not published because the result failed validation (the last good one stayed).",
		}),
		odAdmitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: contract.MetricOnDemandAdmitted,
			Help: "Cluster names the node proxy asked for that were admitted (known Service ports), including pending names admitted later.",
		}),
		odRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: contract.MetricOnDemandRefused,
			Help: "Cluster names the node proxy asked for that were refused, by reason.",
		}, []string{contract.LabelReason}),
		odDemanded: g(contract.MetricOnDemandDemanded, "Admitted on-demand cluster names."),
		odPending:  g(contract.MetricOnDemandPending, "Refused names remembered and admitted once they become known Service ports."),
		odForgotten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: contract.MetricOnDemandForgotten,
			Help: "Refused names not remembered (malformed, outside the range, or the pending set full): answered to the proxy as not existing.",
		}),
		odForgottenAddrs: g(contract.MetricOnDemandForgottenAddrs, "Service-range addresses remembered for forgotten names: a Service created at one has its ports admitted."),
		settingsErrors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: contract.MetricSettingsErrors,
			Help: "Per key of the agent ConfigMap, 1 while its value does not parse (the setting keeps its last good value; /status settingsErrors names it); key=\"" + contract.SettingsKeyUnknown + "\" counts the keys the agent does not know.",
		}, []string{contract.LabelKey}),
		rangeKnown: g(contract.MetricServiceRangeKnown, "1 while the Service range is known (a ServiceCIDR with an IPv4 CIDR, or --service-range); 0: every captured connection passes through to kube-proxy."),
	}
	for _, r := range refusalReasons {
		m.odRefused.WithLabelValues(r)
	}
	suppressed, err := xdsserver.SuppressedLines(reg)
	if err != nil {
		return nil, err
	}
	m.logSuppressed = suppressed.WithLabelValues(contract.LogNameOnDemandRefusal)
	m.setSettingsErrors(nil)
	for _, c := range []prometheus.Collector{m.version, m.clusters, m.endpoints, m.listeners, m.resources, m.push, m.programming, m.rejected,
		m.odAdmitted, m.odRefused, m.odDemanded, m.odPending, m.odForgotten, m.odForgottenAddrs, m.rangeKnown, m.settingsErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}
