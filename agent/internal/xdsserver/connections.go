package xdsserver

import (
	"net/netip"
	"strconv"
	"sync"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

// Source is the pod a connection came from: its namespace, name and workload (the name the
// connection counts under, contract.LabelSourceWorkload).
type Source struct {
	Namespace, Pod, Workload string
}

// Sources finds the pod that has a source address among the pods the agent knows on its
// node; the agent's pod informer answers it. It is called on the access log's goroutines
// and must not block.
type Sources interface {
	Source(ip netip.Addr) (Source, bool)
}

// connKey is one label set of contract.MetricSvcConnections.
type connKey struct {
	srcNamespace, srcWorkload, namespace, service, port string
}

// connections counts the connected entries of contract.ConnectionLogName in
// contract.MetricSvcConnections, at most limit label sets; the entries of any further label set
// count in one overflow series. A label set, once counted, stays: a counter that vanished
// and came back would read as a reset.
type connections struct {
	vec   *prometheus.CounterVec
	limit int

	mu       sync.Mutex
	series   map[connKey]prometheus.Counter
	overflow prometheus.Counter // created by the first label set over limit
}

func newConnections(limit int) *connections {
	return &connections{limit: limit, series: map[connKey]prometheus.Counter{},
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: contract.MetricSvcConnections,
			Help: "Connections the node proxy connected to a Service port's endpoint, by source pod's namespace and workload and by Service port.",
		}, []string{contract.LabelSourceNamespace, contract.LabelSourceWorkload, contract.LabelNamespace, contract.LabelService, contract.LabelPort}),
	}
}

// counter returns k's counter, or the overflow series' once limit label sets are counted.
func (c *connections) counter(k connKey) prometheus.Counter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctr, ok := c.series[k]; ok {
		return ctr
	}
	if len(c.series) >= c.limit {
		if c.overflow == nil {
			c.overflow = c.vec.WithLabelValues("", contract.SourceOverflow, "", "", "")
		}
		return c.overflow
	}
	ctr := c.vec.WithLabelValues(k.srcNamespace, k.srcWorkload, k.namespace, k.service, k.port)
	c.series[k] = ctr
	return ctr
}

// source names the pod of a connection's source address: the workload, or SourceUnknown
// with no namespace when no pod on the node has the address.
func (s *Server) source(addr netip.Addr) (Source, bool) {
	if h := s.sources.Load(); h != nil && addr.IsValid() {
		if src, ok := (*h).Source(addr); ok {
			return src, true
		}
	}
	return Source{Workload: contract.SourceUnknown}, false
}

// connected counts one entry of the connection log. Only TcpUpstreamConnected entries count
// (the log's filter sends no other); one whose destination is no longer a known Service port
// (the Service went between the connect and this entry) names no Service and is not counted.
func (s *Server) connected(e *accesslogdatav3.TCPAccessLogEntry) {
	cp := e.GetCommonProperties()
	if cp.GetAccessLogType() != accesslogdatav3.AccessLogType_TcpUpstreamConnected {
		return
	}
	dst, ok := addrPort(cp.GetDownstreamLocalAddress())
	if !ok {
		return
	}
	res := s.index.Lookup(dst)
	if res.Class != svcindex.Known {
		return
	}
	src, _ := addrPort(cp.GetDownstreamRemoteAddress())
	pod, _ := s.source(src.Addr())
	s.connections.counter(connKey{srcNamespace: pod.Namespace, srcWorkload: pod.Workload, namespace: res.Service.Namespace,
		service: res.Service.Name, port: strconv.Itoa(int(dst.Port()))}).Inc()
}
