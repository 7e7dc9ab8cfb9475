package nodeproxy

// The global downstream connection limit, as Envoy's overload manager enforces
// its envoy.resource_monitors.global_downstream_max_connections monitor:
// source/common/network/tcp_listener_impl.cc TcpListenerImpl::onSocketEvent
// accepts, asks rejectCxOverGlobalLimit for a slot (one atomic count for the
// whole process, source/extensions/resource_monitors/downstream_connections
// ActiveDownstreamConnectionsResourceMonitor::tryAllocateResource), and over
// the limit closes the accepted socket at once and reports it to
// source/common/listener_manager/active_tcp_listener.cc
// ActiveTcpListener::onReject, which counts the listener's
// downstream_global_cx_overflow. The slot is given back when the accepted
// socket is destroyed (AcceptedSocketImpl's destructor). Envoy's admin listener
// runs on the main thread's connection handler, which has no overload manager,
// so admin connections are neither counted nor refused; the built-in's admin
// server is outside its listeners likewise.

import (
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// statGlobalCxOverflow is the listener counter of connections closed over the
// global limit (listener.<address>.downstream_global_cx_overflow).
const statGlobalCxOverflow = "downstream_global_cx_overflow"

// rejectLogInterval spaces the lines that report connections closed over the
// limit, and failed accepts.
const rejectLogInterval = 10 * time.Second

// The lines that report them.
const (
	logOverflow     = "downstream connections closed at accept: at the global connection limit"
	logAcceptFailed = "accept failed; retrying"
)

// cxLimit counts the accepted downstream connections of every listener
// together, from accept until the downstream socket closes.
type cxLimit struct {
	max    int64 // 0: no limit (Envoy without the monitor)
	active atomic.Int64
}

// tryAcquire takes a slot: false, and nothing counted, when max are taken.
// Check and count are one step, so connections accepted at once on several
// listeners cannot overshoot (tryAllocateResource's compare-and-swap).
func (l *cxLimit) tryAcquire() bool {
	for {
		cur := l.active.Load()
		if l.max > 0 && cur >= l.max {
			return false
		}
		if l.active.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

func (l *cxLimit) release() { l.active.Add(-1) }

// full reports that the next connection would be closed at accept.
func (l *cxLimit) full() bool { return l.max > 0 && l.active.Load() >= l.max }

// countOverflow counts a connection closed at accept over the limit, on the
// listener that accepted it, and reports the closures at most once per
// rejectLogInterval.
func (p *Proxy) countOverflow(cfg *xdsconfig.Listener) {
	p.stats.inc(listenerStatPrefix(cfg) + statGlobalCxOverflow)
	if n, ok := p.overflowLog.note(p.now()); ok {
		p.log.Warn(logOverflow, "closed", n, "limit", p.cx.max, "listener", cfg.Name)
	}
}

// checkFDLimit warns when the limit cannot keep the process below its
// file-descriptor limit (contract.ProxyFDLimit says where that comes from),
// and, as Envoy does at start, when there is no limit.
func checkFDLimit(log *slog.Logger, maxConns int64) {
	if maxConns == 0 {
		log.Warn("no limit on active downstream connections; set --max-downstream-connections")
		return
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("cannot read the file-descriptor limit", "err", err)
		return
	}
	need := uint64(maxConns)*contract.ProxyFDsPerConnection + contract.ProxyFDHeadroom
	if rl.Cur < need {
		log.Warn("file-descriptor limit below what the downstream connection limit needs",
			"fd_limit", rl.Cur, "needed", need, "max_downstream_connections", maxConns)
	}
}
