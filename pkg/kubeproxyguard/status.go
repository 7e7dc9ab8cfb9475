package kubeproxyguard

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Service states in ServiceStatus.State.
const (
	StateUnknown = "unknown" // no pass has looked yet
	StateOnPath  = "on-path" // a ClusterIP entry of the Service is in the table (the last cut failed)
	StateClean   = "clean"   // no ClusterIP entry of a port the meshed path takes over left on kube-proxy's path (each cut, or gone)
)

// ObjectRef names one kube-proxy object. Elements are named as nft prints
// them, prefixed by their map: "service-ips: 10.96.100.100 . tcp . 80 : goto service-…".
type ObjectRef struct {
	Kind string `json:"kind"` // element (the only kind the guard cuts)
	Name string `json:"name"`
}

// Status is the JSON served at /status.
type Status struct {
	Node  string `json:"node"`
	Table string `json:"table"`
	// Cut is the cut mode: contract.GuardCutAll or contract.GuardCutProxy.
	Cut string `json:"cut"`
	// ProxyCut is the proxy cut's table (Cut contract.GuardCutProxy only).
	ProxyCut      *ProxyCutStatus `json:"proxyCut,omitempty"`
	TablePresent  bool            `json:"tablePresent"`
	Monitor       MonitorStatus   `json:"monitor"`
	Passes        uint64          `json:"passes"`
	LastPass      time.Time       `json:"lastPass"`
	LastPassError string          `json:"lastPassError,omitempty"`
	// NamespaceSelector is the selector the Services of whole namespaces are chosen by
	// (WatchServicesByNamespace); nil when only labelled Services are (WatchServices, and the
	// one-shot and watch commands).
	NamespaceSelector *NamespaceSelectorStatus `json:"namespaceSelector,omitempty"`
	Services          []ServiceStatus          `json:"services"`
	// Refused: chosen Services the guard will not cut (see Refuse).
	Refused []RefusedService `json:"refused"`
}

// ProxyCutStatus is the guard's own table of the proxy cut.
type ProxyCutStatus struct {
	Table string `json:"table"`
	Set   string `json:"set"`
	// Mark is the SO_MARK refused (contract.ProxyUpstreamMark), hex.
	Mark string `json:"mark"`
	// Resets counts the node proxy's new connections reset since the table was written (the
	// rule's counter, as the last pass read it).
	Resets uint64 `json:"resets"`
}

// RefusedService is a chosen Service the guard refuses to cut, and why.
type RefusedService struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Reason    string `json:"reason"`
}

// KeptPort is a port of a guarded Service that the guard leaves on
// kube-proxy's path, and why: "udp/53", "udp: not served by the agent".
type KeptPort struct {
	Port   string `json:"port"`
	Reason string `json:"reason"`
}

// MonitorStatus is the nft event subscription.
type MonitorStatus struct {
	Subscribed      bool   `json:"subscribed"`
	Resubscriptions int    `json:"resubscriptions"`
	LastError       string `json:"lastError,omitempty"`
}

// ServiceStatus is one guarded Service on this node.
type ServiceStatus struct {
	Namespace    string    `json:"namespace"`
	Name         string    `json:"name"`
	GuardedSince time.Time `json:"guardedSince"`
	State        string    `json:"state"`
	// Cut is how CutPorts are cut (Status.Cut): contract.GuardCutAll, kube-proxy's ClusterIP
	// entries overwritten, for every client; contract.GuardCutProxy, refused to the node
	// proxy's connections only (ProxyCut), every other client keeps kube-proxy.
	Cut string `json:"cut"`
	// CutPorts: the ports ("tcp/80") whose ClusterIP entries the guard
	// cuts, the ones the meshed path takes over (contract.MeshServes), as
	// the last pass found them.
	CutPorts []string `json:"cutPorts"`
	// ProxyCut: with Cut contract.GuardCutProxy, the "ClusterIP . port" elements of the
	// guard's set that refuse the node proxy this Service, as nft prints them.
	ProxyCut []string `json:"proxyCut,omitempty"`
	// KubeProxyPorts: the other ports, left on kube-proxy's path, and why.
	KubeProxyPorts []KeptPort `json:"kubeProxyPorts"`
	// Remaining: the ClusterIP entries the last pass failed to cut
	// (empty when clean).
	Remaining []ObjectRef `json:"remaining"`
	// Deleted: every ClusterIP entry the guard has cut for this Service,
	// once each, named as kube-proxy wrote it ("… : goto service-…"), not as
	// the cut reads ("… : continue"). The JSON names predate the overwrite
	// and stay for their readers (fixtures/guard, e2e evidence).
	Deleted []ObjectRef `json:"deleted"`
	// Deletions counts cut transactions; Redeletions those after the guard
	// had seen the Service off kube-proxy's path (kube-proxy restored it).
	Deletions   int `json:"deletions"`
	Redeletions int `json:"redeletions"`
	// LastRedeletionLatencySeconds: from the guard observing the restore
	// (the nft monitor event, or the start of the periodic pass that found
	// it) to the commit of the transaction that cut it again.
	LastRedeletion               *time.Time `json:"lastRedeletion,omitempty"`
	LastRedeletionLatencySeconds float64    `json:"lastRedeletionLatencySeconds"`
	Errors                       int        `json:"errors"`
	LastError                    string     `json:"lastError,omitempty"`
}

// Status returns a snapshot, Services sorted by namespace/name.
func (g *Guard) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.st
	if s.ProxyCut != nil {
		pc := *s.ProxyCut
		s.ProxyCut = &pc
	}
	s.Services = []ServiceStatus{}
	for svc, st := range g.services {
		ss := ServiceStatus{
			Namespace: svc.Namespace, Name: svc.Name,
			GuardedSince: st.since, State: st.state, Cut: g.o.Cut,
			Remaining: append([]ObjectRef{}, st.remaining...),
			Deleted:   []ObjectRef{},
			Deletions: st.deletions, Redeletions: st.redeletions,
			LastRedeletionLatencySeconds: st.lastLatency.Seconds(),
			Errors:                       st.errors, LastError: st.lastError,
		}
		ss.CutPorts = append([]string{}, st.cutPorts...)
		ss.KubeProxyPorts = append([]KeptPort{}, st.keptPorts...)
		for _, v := range st.proxyCut {
			ss.ProxyCut = append(ss.ProxyCut, v.String())
		}
		if !st.lastRedel.IsZero() {
			t := st.lastRedel
			ss.LastRedeletion = &t
		}
		for r := range st.deleted {
			ss.Deleted = append(ss.Deleted, r)
		}
		sort.Slice(ss.Deleted, func(i, j int) bool {
			a, b := ss.Deleted[i], ss.Deleted[j]
			return a.Kind < b.Kind || a.Kind == b.Kind && a.Name < b.Name
		})
		s.Services = append(s.Services, ss)
	}
	sort.Slice(s.Services, func(i, j int) bool {
		a, b := s.Services[i], s.Services[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	s.Refused = []RefusedService{}
	for svc, why := range g.refused {
		s.Refused = append(s.Refused, RefusedService{Namespace: svc.Namespace, Name: svc.Name, Reason: why})
	}
	sort.Slice(s.Refused, func(i, j int) bool {
		a, b := s.Refused[i], s.Refused[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return s
}

// Handler serves /status (JSON), /metrics (Prometheus) and /healthz.
func (g *Guard) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(g.Status())
	})
	mux.Handle("/metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
