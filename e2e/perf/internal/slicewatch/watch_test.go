package slicewatch

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

func slice(name, svc string, ready map[string]bool) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	for a, r := range ready {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
	}
	return es
}

func TestObserve(t *testing.T) {
	w := New()
	t0 := time.Now()
	clock := t0
	w.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	w.Observe(watch.Added, slice("s-1", "svc", map[string]bool{"a": true, "x": false}))    // t0+1s
	w.Observe(watch.Modified, slice("s-1", "svc", map[string]bool{"x": false, "a": true})) // no change
	w.Observe(watch.Added, slice("t-1", "twin", map[string]bool{"a": true}))               // another Service
	w.Observe(watch.Modified, slice("s-1", "svc", map[string]bool{"a": true, "x": true}))  // t0+4s
	w.Observe(watch.Added, slice("s-2", "svc", map[string]bool{"y": true}))                // t0+5s: a second slice
	w.Observe(watch.Deleted, slice("s-1", "svc", nil))                                     // t0+6s
	w.Observe(watch.Added, &discoveryv1.EndpointSlice{})                                   // no Service: ignored

	o, ok := w.First("svc", t0, Has("x"))
	if !ok || !o.At.Equal(t0.Add(4*time.Second)) {
		t.Errorf("First(x ready) = %v %v, want t0+4s", o, ok)
	}
	// At t0+5s x is still ready in slice s-1, next to y in s-2; s-1's deletion takes it.
	o, ok = w.First("svc", t0.Add(4*time.Second+1), Lacks("x"))
	if !ok || !o.At.Equal(t0.Add(6*time.Second)) || len(o.Ready) != 1 || o.Ready[0] != "y" {
		t.Errorf("First(x not ready after 4s) = %+v %v, want t0+6s [y]", o, ok)
	}
	if o, ok := w.First("twin", t0, Any); !ok || !o.At.Equal(t0.Add(3*time.Second)) {
		t.Errorf("First(twin, any) = %+v %v", o, ok)
	}
	if _, ok := w.First("nothing", t0, Any); ok {
		t.Error("First of an unknown Service: found")
	}
}
