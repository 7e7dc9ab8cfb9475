package xdsserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// Index answers what a restored destination is; *svcindex.Index satisfies it.
type Index interface {
	Lookup(dst netip.AddrPort) svcindex.Result
}

// Update is one change to the published resources. Upserts are applied before deletions and
// endpoints before clusters before listeners, so the proxy never sees a reference to a
// resource it cannot have.
type Update struct {
	Clusters, Loads, Listeners                   map[string]types.Resource
	DeleteClusters, DeleteLoads, DeleteListeners []string
}

// Empty reports whether u changes nothing.
func (u Update) Empty() bool {
	return len(u.Clusters)+len(u.Loads)+len(u.Listeners)+len(u.DeleteClusters)+len(u.DeleteLoads)+len(u.DeleteListeners) == 0
}

// DemandHandler receives the cluster names the node proxy subscribes to or unsubscribes from
// on its delta CDS subscription (on-demand CDS). It runs on the ADS stream's goroutine and must
// not block: record the names and return. It returns the subscribed names it does not keep:
// the server answers each as not existing (removed_resources) and holds no state for it.
type DemandHandler interface {
	ClusterDemand(subscribe, unsubscribe []string) (forget []string)
}

// Server is the agent's gRPC server: delta ADS and ALS.
type Server struct {
	cds, eds, lds *cache.LinearCache
	xds           server.Server
	index         Index
	log           *slog.Logger
	refused       *prometheus.CounterVec
	nodeLocal     *nodeLocal
	nacks         prometheus.Counter
	demand        atomic.Pointer[DemandHandler]
	sources       atomic.Pointer[Sources]
	streams       cdsStreams
	refusalLog    refusalLog
	connections   *connections
}

// SetDemandHandler routes the proxy's named CDS subscriptions to h.
func (s *Server) SetDemandHandler(h DemandHandler) { s.demand.Store(&h) }

// SetSources names the pods of source addresses with src: the connections' source labels
// and the refusal line's source pod. Without it every source is unknown.
func (s *Server) SetSources(src Sources) { s.sources.Store(&src) }

// New builds a server; metrics register with reg.
func New(ctx context.Context, index Index, reg prometheus.Registerer, log *slog.Logger) (*Server, error) {
	s := &Server{
		cds:   cache.NewLinearCache(resource.ClusterType),
		eds:   cache.NewLinearCache(resource.EndpointType),
		lds:   cache.NewLinearCache(resource.ListenerType),
		index: index,
		log:   log,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: contract.MetricSvcRefused,
			Help: "Captured connections to the Service range the node proxy refused, by reason and Service.",
		}, []string{contract.LabelReason, contract.LabelNamespace, contract.LabelService}),
		nodeLocal: newNodeLocal(log),
		nacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: contract.MetricXDSNacks, Help: "xDS updates the node proxy rejected.",
		}),
		connections: newConnections(contract.MaxConnectionSeries),
	}
	for _, c := range []prometheus.Collector{s.refused, s.nodeLocal.refused, s.nacks, s.connections.vec} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	suppressed, err := SuppressedLines(reg)
	if err != nil {
		return nil, err
	}
	s.refusalLog = newRefusalLog(log, suppressed.WithLabelValues(contract.LogNameRefusal))
	go s.refusalLog.run(ctx)
	mux := &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return r.GetTypeUrl() },
		Caches: map[string]cache.Cache{
			resource.ClusterType: s.cds, resource.EndpointType: s.eds, resource.ListenerType: s.lds,
		},
	}
	s.xds = server.NewServer(ctx, mux, server.CallbackFuncs{
		DeltaStreamOpenFunc: func(_ context.Context, id int64, typeURL string) error {
			log.Info("xDS stream opened", "stream", id, "type", typeURL)
			return nil
		},
		DeltaStreamClosedFunc: func(id int64, node *corev3.Node) {
			s.streams.closed(id)
			log.Info("xDS stream closed", "stream", id, "node", node.GetId())
		},
		StreamDeltaRequestFunc: func(id int64, r *discoverygrpc.DeltaDiscoveryRequest) error {
			if r.GetErrorDetail() != nil {
				s.nacks.Inc()
				log.Warn("node proxy rejected an update", "stream", id, "type", r.GetTypeUrl(), "error", r.GetErrorDetail().GetMessage())
			}
			if r.GetTypeUrl() == resource.ClusterType {
				s.clusterDemand(id, r)
			}
			return nil
		},
	})
	return s, nil
}

// clusterDemand passes the named part of a delta CDS request on; "*" is the wildcard
// subscription itself (the xDS "explicit wildcard"), never a cluster name. The names the
// handler does not keep are answered as not existing (forget.go).
func (s *Server) clusterDemand(stream int64, r *discoverygrpc.DeltaDiscoveryRequest) {
	wildcard := s.streams.request(stream, r)
	h := s.demand.Load()
	if h == nil {
		return
	}
	sub, unsub := withoutWildcard(r.GetResourceNamesSubscribe()), withoutWildcard(r.GetResourceNamesUnsubscribe())
	if len(sub)+len(unsub) == 0 {
		return
	}
	if forget := (*h).ClusterDemand(sub, unsub); len(forget) > 0 {
		s.forget(stream, r, wildcard, forget)
	}
}

func withoutWildcard(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "*" {
			out = append(out, n)
		}
	}
	return out
}

// Apply publishes u to every subscribed proxy.
func (s *Server) Apply(u Update) error {
	var errs []error
	if len(u.Loads) > 0 {
		errs = append(errs, s.eds.UpdateResources(u.Loads, nil))
	}
	if len(u.Clusters) > 0 {
		errs = append(errs, s.cds.UpdateResources(u.Clusters, nil))
	}
	if len(u.Listeners)+len(u.DeleteListeners) > 0 {
		errs = append(errs, s.lds.UpdateResources(u.Listeners, u.DeleteListeners))
	}
	if len(u.DeleteClusters) > 0 {
		errs = append(errs, s.cds.UpdateResources(nil, u.DeleteClusters))
	}
	if len(u.DeleteLoads) > 0 {
		errs = append(errs, s.eds.UpdateResources(nil, u.DeleteLoads))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// Register adds the ADS and ALS services to g.
func (s *Server) Register(g *grpc.Server) {
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, s.xds)
	accesslogv3.RegisterAccessLogServiceServer(g, &als{s: s})
}

// Listen opens the unix socket the proxy shares, readable and writable by the owner only.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("xDS socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale xDS socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// Refusal is one classified UH/NC access log entry.
type Refusal struct {
	Reason      string
	Service     k8stypes.NamespacedName
	Flag        string // UH or NC
	Destination netip.AddrPort
	Source      netip.AddrPort
	Cluster     string
}

// Classify names the reason of one access log entry; ok is false for entries that are not
// refusals (neither UH nor NC) or carry no destination.
func (s *Server) Classify(e *accesslogdatav3.TCPAccessLogEntry) (r Refusal, ok bool) {
	cp := e.GetCommonProperties()
	r.Destination, ok = addrPort(cp.GetDownstreamLocalAddress())
	if !ok {
		return r, false
	}
	r.Source, _ = addrPort(cp.GetDownstreamRemoteAddress())
	r.Cluster = cp.GetUpstreamCluster()
	res := s.index.Lookup(r.Destination)
	switch {
	case cp.GetResponseFlags().GetNoHealthyUpstream():
		r.Flag, r.Reason, r.Service = "UH", contract.ReasonNoEndpoints, res.Service
	case cp.GetResponseFlags().GetNoClusterFound():
		r.Flag = "NC"
		switch res.Class {
		case svcindex.PortNotDeclared:
			r.Reason, r.Service = contract.ReasonPortNotDeclared, res.Service
		case svcindex.Known:
			r.Reason, r.Service = contract.ReasonNotProgrammed, res.Service
		default: // NoService; External only if the range moved under the proxy
			r.Reason = contract.ReasonNoService
		}
	default:
		return r, false
	}
	return r, true
}

func (s *Server) record(r Refusal) {
	s.refused.WithLabelValues(r.Reason, r.Service.Namespace, r.Service.Name).Inc()
	if !s.refusalLog.allow(r, time.Now()) {
		return
	}
	srcPod := ""
	if pod, ok := s.source(r.Source.Addr()); ok {
		srcPod = pod.Namespace + "/" + pod.Pod
	}
	s.log.Info(contract.LogRefusal, contract.LogKeyReason, r.Reason, contract.LogKeyNamespace, r.Service.Namespace,
		contract.LogKeyService, r.Service.Name, contract.LogKeyDestination, r.Destination.String(), contract.LogKeySource, r.Source.String(),
		contract.LogKeySourcePod, srcPod, contract.LogKeyFlag, r.Flag, contract.LogKeyCluster, r.Cluster)
}

type als struct {
	accesslogv3.UnimplementedAccessLogServiceServer
	s *Server
}

// StreamAccessLogs reads one logger's stream. Its first message names the log (Envoy's
// GrpcAccessLoggerImpl sends the identifier on a stream's first message only): entries of
// contract.NodeLocalLogName are node-local refusals, those of contract.ConnectionLogName
// connections, all others are classified as refusals of the Service range.
func (a *als) StreamAccessLogs(stream grpc.ClientStreamingServer[accesslogv3.StreamAccessLogsMessage, accesslogv3.StreamAccessLogsResponse]) error {
	logName := ""
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&accesslogv3.StreamAccessLogsResponse{})
		}
		if err != nil {
			return err
		}
		if id := msg.GetIdentifier(); id != nil {
			logName = id.GetLogName()
		}
		for _, e := range msg.GetTcpLogs().GetLogEntry() {
			switch logName {
			case contract.NodeLocalLogName:
				a.s.nodeLocal.record(e)
				continue
			case contract.ConnectionLogName:
				a.s.connected(e)
				continue
			}
			if r, ok := a.s.Classify(e); ok {
				a.s.record(r)
			}
		}
	}
}

func addrPort(a *corev3.Address) (netip.AddrPort, bool) {
	sa := a.GetSocketAddress()
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return netip.AddrPort{}, false
	}
	if sa.GetPortValue() > 65535 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(sa.GetPortValue())), true
}
