package adstest_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/svclb/internal/adsclient"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
)

var _ adsclient.Handler = (*adstest.Recorder)(nil)

func cluster(name string, typ clusterv3.Cluster_DiscoveryType) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: typ}}
}

func load(name string, ips ...string) *endpointv3.ClusterLoadAssignment {
	l := &endpointv3.LocalityLbEndpoints{}
	for _, ip := range ips {
		l.LbEndpoints = append(l.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 80}}}}}}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{l}}
}

// TestRecorder drives the Recorder with the real adsclient: resources by type,
// EDS asked for the EDS clusters, removals, and a NACK on demand.
func TestRecorder(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ads.sock")
	caches := adstest.NewLinear()
	var mu sync.Mutex
	var nacks []string
	adstest.Serve(t, sock, caches.Mux, func(_ int64, r *discoveryv3.DeltaDiscoveryRequest) {
		if r.ErrorDetail != nil {
			mu.Lock()
			nacks = append(nacks, r.ErrorDetail.Message)
			mu.Unlock()
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(caches.EDS.UpdateResource("eds", load("eds", "10.0.0.1", "10.0.0.2")))
	must(caches.CDS.UpdateResource("eds", cluster("eds", clusterv3.Cluster_EDS)))
	must(caches.CDS.UpdateResource("dst", cluster("dst", clusterv3.Cluster_ORIGINAL_DST)))

	r := adstest.NewRecorder()
	adstest.Start(context.Background(), t, sock, &adsclient.Client{Node: &corev3.Node{Id: "test"}, Handler: r, StreamEnded: r.StreamEnded})
	adstest.Eventually(t, "the EDS cluster's endpoints", func() bool { return r.Endpoints("eds") == 2 })
	if got := r.Names(resourcev3.ClusterType); !slices.Equal(got, []string{"dst", "eds"}) {
		t.Errorf("clusters %v", got)
	}
	if got := r.EDSNames(); !slices.Equal(got, []string{"eds"}) {
		t.Errorf("EDS names %v, want the EDS cluster only", got)
	}

	must(caches.CDS.DeleteResource("dst"))
	adstest.Eventually(t, "dst removed", func() bool { return !r.Has(resourcev3.ClusterType, "dst") })
	if got := r.Removed(resourcev3.ClusterType); !slices.Equal(got, []string{"dst"}) {
		t.Errorf("removed %v", got)
	}
	if got := r.Seen(resourcev3.ClusterType); !slices.Equal(got, []string{"dst", "eds"}) {
		t.Errorf("seen %v, want every name ever received", got)
	}

	r.Reject(resourcev3.ClusterType, errors.New("no thanks"))
	must(caches.CDS.UpdateResource("late", cluster("late", clusterv3.Cluster_ORIGINAL_DST)))
	adstest.Eventually(t, "the NACK", func() bool { return r.NACKs(resourcev3.ClusterType) == 1 })
	adstest.Eventually(t, "the NACK at the server", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(nacks, []string{"no thanks"})
	})
	if r.Has(resourcev3.ClusterType, "late") {
		t.Error("a rejected cluster was recorded")
	}
	r.Reject(resourcev3.ClusterType, nil)
	must(caches.CDS.UpdateResource("later", cluster("later", clusterv3.Cluster_ORIGINAL_DST)))
	adstest.Eventually(t, "accepted again", func() bool { return r.Has(resourcev3.ClusterType, "later") })
	if errs := r.StreamErrors(); len(errs) != 0 {
		t.Errorf("stream errors %v", errs)
	}
}
