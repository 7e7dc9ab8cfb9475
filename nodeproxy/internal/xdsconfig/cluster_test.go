package xdsconfig

import (
	"math"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/svclb/internal/translate"
)

// agentOutlier is the outlier_detection the agent emits.
func agentOutlier() *clusterv3.OutlierDetection {
	return &clusterv3.OutlierDetection{
		SplitExternalLocalOriginErrors:         true,
		ConsecutiveLocalOriginFailure:          wrapperspb.UInt32(5),
		EnforcingConsecutiveLocalOriginFailure: wrapperspb.UInt32(100),
		EnforcingLocalOriginSuccessRate:        wrapperspb.UInt32(0),
		MaxEjectionPercent:                     wrapperspb.UInt32(99),
	}
}

func edsCluster(od *clusterv3.OutlierDetection) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 "svc:10.96.0.10:53",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}},
		LbPolicy:         clusterv3.Cluster_ROUND_ROBIN,
		OutlierDetection: od,
	}
}

func TestOutlierAgentShape(t *testing.T) {
	c, err := ParseCluster(edsCluster(agentOutlier()))
	if err != nil {
		t.Fatal(err)
	}
	want := Outlier{ConsecutiveLocalOriginFailure: 5, EnforcingLocalOrigin: 100, MaxEjectionPercent: 99,
		BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 300 * time.Second, Interval: 10 * time.Second}
	if *c.Outlier != want {
		t.Fatalf("outlier %+v, want %+v", *c.Outlier, want)
	}
}

// With split_external_local_origin_errors tcp_proxy's connect results feed the
// local-origin success-rate and failure-percentage detectors too; those are not
// implemented, so they must be disabled explicitly.
func TestOutlierLocalOriginDetectorsMustBeOff(t *testing.T) {
	for name, tc := range map[string]struct {
		mut     func(*clusterv3.OutlierDetection)
		wantErr string // "" = accepted
	}{
		"success rate absent (default 100)":     {func(o *clusterv3.OutlierDetection) { o.EnforcingLocalOriginSuccessRate = nil }, "enforcing_local_origin_success_rate must be set to 0"},
		"success rate 100":                      {func(o *clusterv3.OutlierDetection) { o.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(100) }, "enforcing_local_origin_success_rate must be set to 0"},
		"success rate 1":                        {func(o *clusterv3.OutlierDetection) { o.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(1) }, "enforcing_local_origin_success_rate must be set to 0"},
		"failure percentage absent (default 0)": {func(o *clusterv3.OutlierDetection) {}, ""},
		"failure percentage 0": {func(o *clusterv3.OutlierDetection) {
			o.EnforcingFailurePercentageLocalOrigin = wrapperspb.UInt32(0)
		}, ""},
		"failure percentage 10": {func(o *clusterv3.OutlierDetection) {
			o.EnforcingFailurePercentageLocalOrigin = wrapperspb.UInt32(10)
		}, "enforcing_failure_percentage_local_origin must be 0"},
		// Their tuning and the external-origin detectors are not emitted: NACKed as unsupported fields.
		"success rate minimum hosts": {func(o *clusterv3.OutlierDetection) { o.SuccessRateMinimumHosts = wrapperspb.UInt32(5) }, "success_rate_minimum_hosts"},
		"consecutive 5xx":            {func(o *clusterv3.OutlierDetection) { o.Consecutive_5Xx = wrapperspb.UInt32(5) }, "consecutive_5xx"},
		"jitter":                     {func(o *clusterv3.OutlierDetection) { o.MaxEjectionTimeJitter = durationpb.New(time.Second) }, "max_ejection_time_jitter"},
	} {
		od := agentOutlier()
		tc.mut(od)
		_, err := ParseCluster(edsCluster(od))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: NACK %v", name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.wantErr)
		}
	}
}

// DetectorConfig: durations in whole milliseconds; an unset max_ejection_time
// is max(300 s, base_ejection_time); DetectorImpl::create rejects max < base.
func TestOutlierTimes(t *testing.T) {
	for name, tc := range map[string]struct {
		base, max *durationpb.Duration
		wantBase  time.Duration
		wantMax   time.Duration
		wantErr   string
	}{
		"defaults":                {nil, nil, 30 * time.Second, 300 * time.Second, ""},
		"base above default max":  {durationpb.New(400 * time.Second), nil, 400 * time.Second, 400 * time.Second, ""},
		"max below base":          {durationpb.New(60 * time.Second), durationpb.New(30 * time.Second), 0, 0, "max_ejection_time cannot be smaller than base_ejection_time"},
		"max below default base":  {nil, durationpb.New(10 * time.Second), 0, 0, "max_ejection_time cannot be smaller"},
		"whole milliseconds":      {durationpb.New(1500 * time.Microsecond), nil, time.Millisecond, 300 * time.Second, ""},
		"under a millisecond":     {durationpb.New(500 * time.Microsecond), nil, 0, 0, "base_ejection_time: 500µs is not supported"},
		"over a year not handled": {nil, durationpb.New(400 * 24 * time.Hour), 0, 0, "max_ejection_time"},
	} {
		od := agentOutlier()
		od.BaseEjectionTime, od.MaxEjectionTime = tc.base, tc.max
		c, err := ParseCluster(edsCluster(od))
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: NACK %v", name, err)
		case c.Outlier.BaseEjectionTime != tc.wantBase || c.Outlier.MaxEjectionTime != tc.wantMax:
			t.Errorf("%s: base %v max %v, want %v %v", name, c.Outlier.BaseEjectionTime, c.Outlier.MaxEjectionTime, tc.wantBase, tc.wantMax)
		}
	}
}

// healthy_panic_threshold goes through ProtobufPercentHelper::convertPercent:
// uint64(100 × (value / 100)), truncating (and 29 lands on 28).
func TestPanicThresholdTruncates(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 0}, {0.5, 0}, {29, 28}, {50, 50}, {99.9, 99}, {100, 100}} {
		cl := edsCluster(nil)
		cl.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: tc.in}}
		c, err := ParseCluster(cl)
		if err != nil {
			t.Fatal(err)
		}
		if c.PanicThreshold != tc.want {
			t.Errorf("healthy_panic_threshold %v → %v, want %v", tc.in, c.PanicThreshold, tc.want)
		}
	}
	if c, err := ParseCluster(edsCluster(nil)); err != nil || c.PanicThreshold != 50 {
		t.Fatalf("default panic threshold %v %v, want 50", c, err)
	}
}

// overprovisioning_factor is a uint32 with only "gt: 0" (endpoint.proto
// ClusterLoadAssignment.Policy): the agent's large factor and the maximum are
// accepted as is, 0 fails validation as in Envoy.
func TestAssignmentOverprovisioning(t *testing.T) {
	for _, f := range []uint32{1, 140, translate.Overprovisioning, math.MaxUint32} {
		a, err := ParseAssignment(&endpointv3.ClusterLoadAssignment{ClusterName: "c",
			Policy: &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(f)}})
		if err != nil || a.Overprovisioning != f {
			t.Errorf("factor %d: %+v %v", f, a, err)
		}
	}
	_, err := ParseAssignment(&endpointv3.ClusterLoadAssignment{ClusterName: "c",
		Policy: &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(0)}})
	if err == nil || !strings.Contains(err.Error(), "greater than 0") {
		t.Fatalf("factor 0: %v, want a validation error", err)
	}
}
