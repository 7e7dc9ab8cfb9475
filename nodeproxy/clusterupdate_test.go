package nodeproxy

import (
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/internal/translate"
)

// ejectedSetup is a proxy whose Service has a dead P0 endpoint and a live P1
// one, with the dead one ejected by outlier detection: connections reach P1.
func ejectedSetup(t *testing.T) (p *Proxy, lis netip.AddrPort, name string, cla *endpointv3.ClusterLoadAssignment) {
	t.Helper()
	live, dead := echoServer(t, "p1"), deadAddr(t)
	p, lis, name = localProxy(t, nil, nil, []netip.AddrPort{dead}, []netip.AddrPort{live})
	for range 5 { // consecutive_local_origin_failure
		greet(t, lis)
	}
	if got := greet(t, lis); got != "p1" {
		t.Fatalf("the dead P0 endpoint was not ejected: got %q", got)
	}
	return p, lis, name, loadAssignment(name, []netip.AddrPort{dead}, []netip.AddrPort{live})
}

// updatedCluster is the agent's cluster name changed (connect_timeout), so
// its hash differs, with EDS initial_fetch_timeout ift (0: unset).
func updatedCluster(name string, ift time.Duration) *clusterv3.Cluster {
	c := translate.Cluster(name, localStat, false)
	c.ConnectTimeout = durationpb.New(4 * time.Second)
	if ift > 0 {
		c.GetEdsClusterConfig().GetEdsConfig().InitialFetchTimeout = durationpb.New(ift)
	}
	return c
}

func isWarming(p *Proxy, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.warming[name] != nil
}

// TestCDSUpdateStartsFreshOutlierDetector: a CDS update of a cluster is a new
// cluster with a new outlier detector (cluster_manager_impl.cc loadCluster):
// once it is active, the ejection is gone and the dead P0 endpoint takes the
// load again. Until the new version has its assignment it warms and the old
// version, ejection included, keeps serving. An identical update changes nothing.
func TestCDSUpdateStartsFreshOutlierDetector(t *testing.T) {
	p, lis, name, cla := ejectedSetup(t)
	if err := p.applyClusters([]*clusterv3.Cluster{translate.Cluster(name, localStat, false)}, nil); err != nil {
		t.Fatal(err)
	}
	if isWarming(p, name) || greet(t, lis) != "p1" {
		t.Fatal("an identical cluster update reset the cluster")
	}

	if err := p.applyClusters([]*clusterv3.Cluster{updatedCluster(name, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	if !isWarming(p, name) || p.serverGauges()["cluster_manager.warming_clusters"] != 1 {
		t.Fatal("the updated cluster is not warming until its assignment")
	}
	if got := greet(t, lis); got != "p1" {
		t.Fatalf("while the update warms, the old version serves with its ejection: got %q", got)
	}
	// The agent sends the assignment again: the new version is active, without the ejection.
	if err := p.applyAssignments([]*endpointv3.ClusterLoadAssignment{cla}, nil); err != nil {
		t.Fatal(err)
	}
	if isWarming(p, name) {
		t.Fatal("still warming after the assignment")
	}
	if got := greet(t, lis); got != "" {
		t.Fatalf("after the update got %q: the old ejection survived (want the dead P0 endpoint tried again)", got)
	}
}

// TestCDSUpdateWarmsUntilInitialFetchTimeout: when the agent does not send
// the assignment again, the updated cluster warms until the EDS
// initial_fetch_timeout, then uses the last assignment received
// (EdsClusterImpl::onConfigUpdateFailed with the ADS EDS resources cache),
// with a fresh outlier detector.
func TestCDSUpdateWarmsUntilInitialFetchTimeout(t *testing.T) {
	const ift = 400 * time.Millisecond
	p, lis, name, _ := ejectedSetup(t)
	start := time.Now()
	if err := p.applyClusters([]*clusterv3.Cluster{updatedCluster(name, ift)}, nil); err != nil {
		t.Fatal(err)
	}
	if !isWarming(p, name) {
		t.Fatal("the updated cluster is not warming")
	}
	adstest.Eventually(t, "warming to end", func() bool { return !isWarming(p, name) })
	if d := time.Since(start); d < ift {
		t.Fatalf("warming ended after %v, before the initial fetch timeout %v", d, ift)
	}
	if got := greet(t, lis); got != "" {
		t.Fatalf("after the update got %q: want the cached assignment with no ejection (the dead P0 endpoint)", got)
	}
}
