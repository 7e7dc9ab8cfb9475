package adsclient

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// maxRequestBytes bounds the encoded size of one request the client sends. A gRPC server
// refuses a message over its receive limit (gRPC-Go's default, which the agent keeps, is
// 4 MiB) and ends the stream with it, so a request over it would break every stream in turn
// and the client would never reconnect. A new stream subscribes every on-demand name at once
// (about 25 bytes each): one request would pass 4 MiB at about 160,000 names. Requests are
// cut well under the limit, leaving room for a server that lowers it.
//
// Envoy sends a stream's whole subscription in its first request
// (new_delta_subscription_state.cc NewDeltaSubscriptionState::getNextRequestAckless) and has
// no such cut; the built-in proxy departs from it here. Spreading names over requests is
// within the protocol: resource_names_subscribe and _unsubscribe are changes, and a request
// without a response_nonce may carry any of them. initial_resource_versions cannot be spread
// (a server reads it from a type's first request on a stream only; go-control-plane's
// delta server builds the stream's state from it then), so it goes whole in the first
// request; it holds the clusters the server published, which the server bounds
// (--on-demand-max), not every name a pod dialled: absent and awaiting names have no version.
const maxRequestBytes = 1 << 20

// Field numbers of DeltaDiscoveryRequest's name lists, for their encoded size.
const (
	fieldSubscribe   protowire.Number = 3
	fieldUnsubscribe protowire.Number = 4
)

// nameSize is what name costs in the repeated string field f.
func nameSize(f protowire.Number, name string) int {
	return protowire.SizeTag(f) + protowire.SizeBytes(len(name))
}

// split returns r and the requests that follow it so that each stays under limit bytes: r
// keeps everything it carries but the names that do not fit, which follow, in order, in
// requests of r's type that carry only names (subscriptions first). A name larger than limit
// still goes, alone.
func split(r *discoveryv3.DeltaDiscoveryRequest, limit int) []*discoveryv3.DeltaDiscoveryRequest {
	sub, unsub := r.ResourceNamesSubscribe, r.ResourceNamesUnsubscribe
	r.ResourceNamesSubscribe, r.ResourceNamesUnsubscribe = nil, nil
	out := []*discoveryv3.DeltaDiscoveryRequest{r}
	cur, room := r, limit-proto.Size(r)
	bare := false // cur is a follow-up that carries no name yet
	add := func(f protowire.Number, n string) {
		size := nameSize(f, n)
		if size > room && !bare {
			cur = &discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl}
			out = append(out, cur)
			room, bare = limit-proto.Size(cur), true
		}
		l := listOf(cur, f)
		*l = append(*l, n)
		room -= size
		bare = false
	}
	for _, n := range sub {
		add(fieldSubscribe, n)
	}
	for _, n := range unsub {
		add(fieldUnsubscribe, n)
	}
	return out
}

func listOf(r *discoveryv3.DeltaDiscoveryRequest, f protowire.Number) *[]string {
	if f == fieldSubscribe {
		return &r.ResourceNamesSubscribe
	}
	return &r.ResourceNamesUnsubscribe
}
