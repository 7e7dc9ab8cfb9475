package kubeproxyguard

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// metrics are served at /metrics, prefix svclb_guard_.
type metrics struct {
	reg             *prometheus.Registry
	guarded         prometheus.Gauge
	onPath          *prometheus.GaugeVec
	deletions       *prometheus.CounterVec
	redeletions     *prometheus.CounterVec
	latency         prometheus.Histogram
	errors          *prometheus.CounterVec
	resubscriptions prometheus.Counter
	passes          prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		guarded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svclb_guard_guarded_services", Help: "Services chosen for guarding."}),
		onPath: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svclb_guard_service_on_path", Help: "1 while kube-proxy's ClusterIP entries of a guarded Service are in this node's table (the last cut failed)."},
			[]string{"namespace", "service"}),
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svclb_guard_deletions_total", Help: "Transactions that cut a Service off kube-proxy's ClusterIP path."},
			[]string{"namespace", "service"}),
		redeletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svclb_guard_redeletions_total", Help: "Cuts after kube-proxy restored a guarded Service."},
			[]string{"namespace", "service"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    contract.MetricGuardRedeletionLatency,
			Help:    "From observing kube-proxy's restore to the commit of the re-deletion.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5}}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svclb_guard_errors_total", Help: "Failed operations by kind (read, cut, monitor)."},
			[]string{"op"}),
		resubscriptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svclb_guard_monitor_resubscriptions_total", Help: "Times the nft monitor closed and was renewed."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svclb_guard_passes_total", Help: "Reconcile passes."}),
	}
	m.reg.MustRegister(m.guarded, m.onPath, m.deletions, m.redeletions, m.latency, m.errors, m.resubscriptions, m.passes)
	return m
}

func (m *metrics) forget(s types.NamespacedName) {
	l := prometheus.Labels{"namespace": s.Namespace, "service": s.Name}
	m.onPath.Delete(l)
	m.deletions.Delete(l)
	m.redeletions.Delete(l)
}
