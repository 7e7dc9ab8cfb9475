// Status: the /status document, built after each sync, and the HTTP endpoints that serve it.

package agent

import (
	"encoding/json"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func (s *syncer) handler(reg *prometheus.Registry, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "waiting for the first snapshot", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.status.Load())
	})
	return mux
}

// publishStatus stores the /status document of the sync just done and sets the gauges that
// mirror it.
func (s *syncer) publishStatus(node translate.Node, nodeAddrs []netip.Addr, p1, p2 bool, mode agentstatus.CDSMode, reset bool, settingsErrs []agentstatus.SettingError, lst []agentstatus.ListenerStatus, listenersBuilt bool) {
	old := s.status.Load()
	demanded, pending, forgotten := s.demand.counts()
	st := &agentstatus.Status{Node: node.Name, Zone: node.Zone, NodeAddresses: []string{}, Phase1: p1, Phase2: p2, SnapshotVersion: s.version, Listeners: old.Listeners, Range: []string{},
		CDS: mode, Refusal: refusalName(reset), RefusedAtSyn: s.refuser.destinations(), Demanded: demanded, Pending: pending, Forgotten: forgotten, SettingsErrors: settingsErrs, Enrollment: s.enroll.status()}
	if listenersBuilt {
		st.Listeners = lst
		if st.Listeners == nil {
			st.Listeners = []agentstatus.ListenerStatus{}
		}
	}
	for _, a := range nodeAddrs {
		st.NodeAddresses = append(st.NodeAddresses, a.String())
	}
	for _, n := range s.endpoints {
		st.Endpoints += n
	}
	st.Clusters = len(s.set.Clusters)
	prefixes, known := s.svcIndex.Range()
	st.RangeKnown = known
	for _, p := range prefixes {
		st.Range = append(st.Range, p.String())
	}
	s.noteRange(known, st.Range)
	s.status.Store(st)
	s.m.version.Set(float64(s.version))
	s.m.clusters.Set(float64(st.Clusters))
	s.m.endpoints.Set(float64(st.Endpoints))
	s.m.listeners.Set(float64(len(s.set.Listeners)))
	s.m.resources.Set(float64(len(s.set.Clusters) + len(s.set.Loads) + len(s.set.Listeners)))
	s.m.odDemanded.Set(float64(st.Demanded))
	s.m.odPending.Set(float64(st.Pending))
	s.m.odForgottenAddrs.Set(float64(st.Forgotten))
	s.m.setSettingsErrors(settingsErrs)
}

// rangeState is what the agent last said about the Service range.
type rangeState uint8

const (
	rangeNotSaid rangeState = iota
	rangeKnown
	rangeUnknown
)

// noteRange says once per change whether the Service range is known, and keeps
// contract.MetricServiceRangeKnown in step. Unknown is a warning: no destination is then
// a Service, so every captured connection passes through to kube-proxy whatever the phases.
func (s *syncer) noteRange(known bool, prefixes []string) {
	now, gauge := rangeUnknown, 0.0
	if known {
		now, gauge = rangeKnown, 1
	}
	s.m.rangeKnown.Set(gauge)
	if now == s.rangeSaid {
		return
	}
	s.rangeSaid = now
	if known {
		s.log.Info("Service range known", "range", prefixes)
		return
	}
	s.log.Warn("Service range unknown: no ServiceCIDR with an IPv4 CIDR is readable and --service-range is not set; "+
		"every captured connection passes through to kube-proxy", "metric", contract.MetricServiceRangeKnown)
}
