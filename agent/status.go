package agent

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Status is the /status document (see the package doc).
type Status struct {
	Node            string           `json:"node"`
	Zone            string           `json:"zone"`
	Phase1          bool             `json:"phase1"`
	Phase2          bool             `json:"phase2"`
	SnapshotVersion uint64           `json:"snapshotVersion"`
	Clusters        int              `json:"clusters"`
	Endpoints       int              `json:"endpoints"`
	Listeners       []ListenerStatus `json:"listeners"`
	RangeKnown      bool             `json:"rangeKnown"`
	Range           []string         `json:"range"`
	CDS             CDSMode          `json:"cds"`
	Demanded        int              `json:"demanded"`
	Pending         int              `json:"pending"`
}

// ListenerStatus is one capture listener.
type ListenerStatus struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Netns     string `json:"netns"`
	Name      string `json:"name"`
}

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
