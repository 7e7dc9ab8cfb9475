package kubeproxyguard

import (
	"context"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
)

// monitorLoop subscribes to nftables events in the guard's namespace and
// triggers a pass on every write to kube-proxy's table. The subscription
// ends when the kernel drops events (ENOBUFS: the monitor's channel closes)
// or on any receive error; it is renewed at once, and a pass runs because
// events may have been lost meanwhile.
func (g *Guard) monitorLoop(ctx context.Context) {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		err := g.monitorOnce(ctx)
		g.mu.Lock()
		g.st.Monitor.Subscribed = false
		if err != nil {
			g.st.Monitor.LastError = err.Error()
		}
		g.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		g.metrics.resubscriptions.Inc()
		g.mu.Lock()
		g.st.Monitor.Resubscriptions++
		g.mu.Unlock()
		g.log.Info("nft monitor closed; subscribing again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if err != nil {
			backoff = min(2*backoff, time.Second)
		} else {
			backoff = 10 * time.Millisecond
		}
	}
}

const monitorReadBuffer = 4 << 20

type monitorError struct{ err error }

func (e monitorError) Error() string { return "nft monitor: " + e.err.Error() }
func (e monitorError) Unwrap() error { return e.err }

func (g *Guard) monitorOnce(ctx context.Context) error {
	// kube-proxy's full sync of a large cluster is thousands of events in
	// one burst: a bigger socket buffer (capped by net.core.rmem_max) makes
	// ENOBUFS rarer. It still happens; the loop above handles it.
	c, err := nftables.New(nftables.WithNetNSFd(g.o.NetNS), nftables.WithSockOptions(func(c *netlink.Conn) error {
		return c.SetReadBuffer(monitorReadBuffer)
	}))
	if err != nil {
		return monitorError{err}
	}
	// A big buffer: the kernel drops events (ENOBUFS) when the socket's
	// queue fills while this goroutine is slow.
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(1024))
	ch, err := c.AddGenerationalMonitor(mon)
	if err != nil {
		g.metrics.errors.WithLabelValues("monitor").Inc()
		return monitorError{err}
	}
	g.monMu.Lock()
	g.mon = mon
	g.monMu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = mon.Close() })
	defer stop()
	defer mon.Close()

	g.mu.Lock()
	g.st.Monitor.Subscribed = true
	g.mu.Unlock()
	// Anything written while not subscribed went unseen.
	g.trigger()

	var recvErr error
	for evs := range ch {
		if evs.GeneratedBy != nil && evs.GeneratedBy.Type == nftables.MonitorEventTypeOOB {
			recvErr = evs.GeneratedBy.Error
		}
		if relevant(evs) {
			g.observe(time.Now())
		}
	}
	if recvErr != nil {
		g.metrics.errors.WithLabelValues("monitor").Inc()
		return monitorError{recvErr}
	}
	return nil
}

// closeMonitor ends the current subscription as the kernel does on ENOBUFS
// (tests use it).
func (g *Guard) closeMonitor() {
	g.monMu.Lock()
	defer g.monMu.Unlock()
	if g.mon != nil {
		_ = g.mon.Close()
	}
}

// relevant reports whether a batch of events may have restored something:
// any addition to kube-proxy's table. Element events carry no table name
// once parsed, so every element addition counts; deletions never do. The
// guard's own cut (and restore) adds an element too, so it triggers one
// more pass; that pass finds the element cut (verdict continue, the
// guard's comment), not on path, and writes nothing: no loop
// (TestGuardOwnWritesDoNotLoop).
func relevant(evs *nftables.MonitorEvents) bool {
	for _, e := range evs.Changes {
		switch e.Type {
		case nftables.MonitorEventTypeNewSetElem:
			return true
		case nftables.MonitorEventTypeNewTable:
			if t, ok := e.Data.(*nftables.Table); !ok || t == nil || t.Name == TableName {
				return true
			}
		case nftables.MonitorEventTypeNewChain:
			if c, ok := e.Data.(*nftables.Chain); !ok || c == nil || c.Table == nil || c.Table.Name == TableName {
				return true
			}
		case nftables.MonitorEventTypeNewRule:
			if r, ok := e.Data.(*nftables.Rule); !ok || r == nil || r.Table == nil || r.Table.Name == TableName {
				return true
			}
		case nftables.MonitorEventTypeNewSet:
			if s, ok := e.Data.(*nftables.Set); !ok || s == nil || s.Table == nil || s.Table.Name == TableName {
				return true
			}
		}
	}
	return false
}
