package nodeproxy

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	"github.com/onsi/gomega"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestConnectionLogEntry: with the agent's Phase 2 config, a connection that reaches its
// endpoint is reported on the connection log once, as the upstream connects (the
// connection still open), with access_log_type TcpUpstreamConnected, the client's address,
// the upstream cluster and host; the refusal log gets nothing for it. A refused connection
// (UH) is reported on the refusal log only, as it ends (TcpConnectionEnd), as Envoy's
// tcp_proxy does with flush_access_log_on_connected (Filter::onUpstreamConnection,
// Filter::flushAccessLog; LogTypeFilter::evaluate).
func TestConnectionLogEntry(t *testing.T) {
	live := echoServer(t, "e")
	a, lis := alsAgent(t, zeroBuffers(), live)
	name := clusterOf(lis)

	c, err := net.DialTimeout("tcp", lis.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
		t.Fatalf("no greeting through the proxy: %v", err)
	}
	client := netip.MustParseAddrPort(c.LocalAddr().String())
	adstest.Eventually(t, "the connected entry while the connection is open", func() bool {
		return len(a.entries(contract.ConnectionLogName)) > 0
	})
	conns := a.entries(contract.ConnectionLogName)
	if len(conns) != 1 {
		t.Fatalf("%d connection entries for one connection: %v", len(conns), conns)
	}
	cp := conns[0].GetCommonProperties()
	if cp.GetAccessLogType() != accesslogdatav3.AccessLogType_TcpUpstreamConnected {
		t.Errorf("access_log_type %v, want TcpUpstreamConnected", cp.GetAccessLogType())
	}
	if got := addrOf(cp.GetDownstreamRemoteAddress()); got != client {
		t.Errorf("downstream_remote_address %v, want the client's %v", got, client)
	}
	if got := addrOf(cp.GetDownstreamLocalAddress()); got != lis {
		t.Errorf("downstream_local_address %v, want %v", got, lis)
	}
	if cp.GetUpstreamCluster() != name || addrOf(cp.GetUpstreamRemoteAddress()) != live || !addrOf(cp.GetUpstreamLocalAddress()).IsValid() {
		t.Errorf("upstream cluster %q host %v local %v, want %q %v and a local address", cp.GetUpstreamCluster(),
			addrOf(cp.GetUpstreamRemoteAddress()), addrOf(cp.GetUpstreamLocalAddress()), name, live)
	}
	c.Close()

	// The end of the served connection passes neither filter.
	g := gomega.NewWithT(t)
	g.Consistently(func() int {
		return len(a.entries(contract.RefusalLogName)) + len(a.entries(contract.ConnectionLogName))
	}).
		WithTimeout(300*time.Millisecond).WithPolling(20*time.Millisecond).Should(gomega.Equal(1), "entries besides the connected one")

	a.set(t, "2", alsResources(lis, zeroBuffers()))
	// Until the proxy applies version 2 a greeting is still served, and logged as connected.
	served := 0
	adstest.Eventually(t, "the UH entry", func() bool {
		if greet(t, lis) != "" {
			served++
		}
		return len(a.entries(contract.RefusalLogName)) > 0
	})
	ref := a.entries(contract.RefusalLogName)[0].GetCommonProperties()
	if !ref.GetResponseFlags().GetNoHealthyUpstream() || ref.GetAccessLogType() != accesslogdatav3.AccessLogType_TcpConnectionEnd {
		t.Errorf("refusal entry flags %v type %v, want UH at TcpConnectionEnd", ref.GetResponseFlags(), ref.GetAccessLogType())
	}
	// A connection entry for each served connection, none for the refused ones.
	g.Eventually(func() int { return len(a.entries(contract.ConnectionLogName)) }).
		WithTimeout(5*time.Second).WithPolling(20*time.Millisecond).Should(gomega.Equal(1+served), "connection entries: the first and the served greetings")
	g.Consistently(func() int { return len(a.entries(contract.ConnectionLogName)) }).
		WithTimeout(300*time.Millisecond).WithPolling(20*time.Millisecond).Should(gomega.Equal(1+served), "connection entries after the refusals")
}

// addrOf is a socket address's address and port; the zero value if it has none.
func addrOf(a *corev3.Address) netip.AddrPort {
	sa := a.GetSocketAddress()
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip, uint16(sa.GetPortValue()))
}
