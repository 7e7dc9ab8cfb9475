package adstest

import (
	"context"
	"maps"
	"slices"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Recorder is an adsclient.Handler that applies nothing and keeps what the
// client was sent, by type URL: the resources it holds, every name it ever
// received and the removals in order. It asks EDS for every EDS cluster it
// holds, as Envoy does, and reports no cluster warming. Reject NACKs a type
// on demand; StreamEnded, wired to adsclient.Client.StreamEnded, records
// broken streams. Every method is safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	held     map[string]map[string]*anypb.Any // type URL → name → resource
	seen     map[string]map[string]bool       // type URL → every name received
	removed  map[string][]string              // type URL → removed names, in order
	eds      map[string]bool                  // held clusters of type EDS
	reject   map[string]error                 // type URL → the NACK's error
	nacks    map[string]int
	failures []error
}

// NewRecorder returns a Recorder that holds nothing yet.
func NewRecorder() *Recorder {
	return &Recorder{held: map[string]map[string]*anypb.Any{}, seen: map[string]map[string]bool{},
		removed: map[string][]string{}, eds: map[string]bool{}, reject: map[string]error{}, nacks: map[string]int{}}
}

// Apply records one response, or NACKs it when its type is rejected.
func (r *Recorder) Apply(_ context.Context, typeURL string, resources []*discoveryv3.Resource, removed []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.reject[typeURL]; err != nil {
		r.nacks[typeURL]++
		return err
	}
	if r.held[typeURL] == nil {
		r.held[typeURL], r.seen[typeURL] = map[string]*anypb.Any{}, map[string]bool{}
	}
	for _, x := range resources {
		r.held[typeURL][x.Name], r.seen[typeURL][x.Name] = x.Resource, true
		if typeURL == resourcev3.ClusterType {
			c := &clusterv3.Cluster{}
			r.eds[x.Name] = x.Resource.UnmarshalTo(c) == nil && c.GetType() == clusterv3.Cluster_EDS
		}
	}
	for _, n := range removed {
		delete(r.held[typeURL], n)
		r.removed[typeURL] = append(r.removed[typeURL], n)
		if typeURL == resourcev3.ClusterType {
			delete(r.eds, n)
		}
	}
	return nil
}

// EDSNames lists the held clusters of type EDS.
func (r *Recorder) EDSNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n, eds := range r.eds {
		if eds {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Warming is always false: listeners are asked for after the first clusters.
func (r *Recorder) Warming() bool { return false }

// StreamEnded records why a stream ended.
func (r *Recorder) StreamEnded(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, err)
}

// StreamErrors lists why each stream ended, oldest first.
func (r *Recorder) StreamErrors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.failures)
}

// Reject NACKs every later response of typeURL with err; a nil err accepts again.
func (r *Recorder) Reject(typeURL string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reject[typeURL] = err
}

// NACKs counts the responses of typeURL rejected.
func (r *Recorder) NACKs(typeURL string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nacks[typeURL]
}

// Has reports whether the client holds resource name of typeURL.
func (r *Recorder) Has(typeURL, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[typeURL][name]
	return ok
}

// Names lists the held resources of typeURL, sorted.
func (r *Recorder) Names(typeURL string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.held[typeURL]))
}

// Seen lists every name of typeURL ever received, sorted.
func (r *Recorder) Seen(typeURL string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.seen[typeURL]))
}

// Removed lists the removals of typeURL, in the order received.
func (r *Recorder) Removed(typeURL string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed[typeURL])
}

// Load is the held load assignment of cluster name, nil when none is held.
func (r *Recorder) Load(name string) *endpointv3.ClusterLoadAssignment {
	r.mu.Lock()
	a := r.held[resourcev3.EndpointType][name]
	r.mu.Unlock()
	cla := &endpointv3.ClusterLoadAssignment{}
	if a == nil || a.UnmarshalTo(cla) != nil {
		return nil
	}
	return cla
}

// Endpoints counts the endpoints of cluster name's held load assignment.
func (r *Recorder) Endpoints(name string) int {
	n := 0
	for _, l := range r.Load(name).GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	return n
}
