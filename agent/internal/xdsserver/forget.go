package xdsserver

import (
	"errors"
	"fmt"
	"sync"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Forgetting a name. go-control-plane keeps every name a stream subscribes to
// (stream/v3 Subscription.subscribedResourceNames) and never answers one it has no resource
// for, so a scan of the Service range would grow its state and leave each of the proxy's
// discoveries waiting for its timeout. For a name the handler does not keep, the server
// appends it to the request's resource_names_unsubscribe before go-control-plane reads the
// request: on a wildcard subscription, a name subscribed and unsubscribed in one request is
// marked as returned with an empty version (Subscription.UpdateResourceSubscriptions, as the
// xDS protocol asks of an explicit unsubscribe under a wildcard), so the LinearCache answers
// at once with the name in removed_resources and then forgets it. The proxy takes that as
// "does not exist": Envoy's OdCdsApi notifies Missing at once
// (source/common/upstream/od_cds_api_impl.cc, onConfigUpdate → notifyMissingCluster) and keeps
// the name requested, waiting for the server
// (new_delta_subscription_state.cc NewDeltaSubscriptionState::handleGoodResponse), so a cluster
// the agent publishes later under that name still reaches it through the wildcard.
//
// Without a wildcard the answer would not be sent (go-control-plane only forgets the name's
// version) and a later cluster would not reach the proxy, so such a request is left alone.

// cdsStreams follows, per ADS stream, whether its CDS subscription is wildcard, by the rules
// go-control-plane applies to the same requests (NewDeltaSubscription,
// UpdateResourceSubscriptions with the legacy wildcard allowed, its default).
type cdsStreams struct {
	mu sync.Mutex
	by map[int64]*cdsState
}

type cdsState struct {
	seen, wildcard, legacy bool
}

// request applies r to the stream's state and reports whether the subscription is wildcard
// after it.
func (c *cdsStreams) request(stream int64, r *discoverygrpc.DeltaDiscoveryRequest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[int64]*cdsState{}
	}
	st := c.by[stream]
	if st == nil {
		st = &cdsState{}
		c.by[stream] = st
	}
	sub, unsub := r.GetResourceNamesSubscribe(), r.GetResourceNamesUnsubscribe()
	if !st.seen {
		st.seen, st.legacy = true, true
		st.wildcard = len(sub) == 0
	}
	if st.legacy {
		if len(sub) == 0 {
			return st.wildcard
		}
		st.legacy = false
	}
	for _, n := range sub {
		if n == "*" {
			st.wildcard = true
		}
	}
	for _, n := range unsub {
		if n == "*" {
			st.wildcard = false
		}
	}
	return st.wildcard
}

func (c *cdsStreams) closed(stream int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.by, stream)
}

// forget makes go-control-plane answer names as removed and keep nothing of them (see above).
func (s *Server) forget(stream int64, r *discoverygrpc.DeltaDiscoveryRequest, wildcard bool, names []string) {
	if !wildcard {
		s.log.Warn("on-demand names over the bound left subscribed: the stream's CDS subscription is not wildcard",
			"stream", stream, "names", len(names))
		return
	}
	r.ResourceNamesUnsubscribe = append(r.ResourceNamesUnsubscribe, names...)
}

// SuppressedLines is contract.MetricLogSuppressed on reg, registered once and shared by
// whoever asks (the refusal lines here, the agent's on-demand summaries).
func SuppressedLines(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: contract.MetricLogSuppressed,
		Help: "Log lines not written because a rate limit held them back (summarised instead), by log.",
	}, []string{contract.LabelLog})
	if err := reg.Register(v); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return ex, nil
			}
		}
		return nil, fmt.Errorf("register %s: %w", contract.MetricLogSuppressed, err)
	}
	for _, l := range []string{contract.LogNameRefusal, contract.LogNameOnDemandRefusal} {
		v.WithLabelValues(l)
	}
	return v, nil
}
