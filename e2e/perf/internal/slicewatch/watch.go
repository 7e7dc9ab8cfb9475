package slicewatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
)

// Observation is a Service's ready addresses (sorted) from the moment At the
// watch delivered the slice event that made them so.
type Observation struct {
	At    time.Time
	Ready []string
}

// Watcher records the ready addresses of every Service of a namespace.
type Watcher struct {
	mu     sync.Mutex
	slices map[string]sliceState    // by slice name
	seen   map[string][]Observation // by Service name
	now    func() time.Time
	err    error
}

type sliceState struct {
	service string
	ready   []string
}

// New returns a Watcher with no events yet (Observe feeds it; Start watches
// a namespace).
func New() *Watcher {
	return &Watcher{slices: map[string]sliceState{}, seen: map[string][]Observation{}, now: time.Now}
}

// Start lists the namespace's EndpointSlices, then watches them until ctx
// ends, from the list's resource version (a dropped watch resumes there).
func (w *Watcher) Start(ctx context.Context, cs kubernetes.Interface, ns string) error {
	api := cs.DiscoveryV1().EndpointSlices(ns)
	l, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list EndpointSlices in %s: %w", ns, err)
	}
	for i := range l.Items {
		w.Observe(watch.Added, &l.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return api.Watch(ctx, o) },
	})
	if err != nil {
		return fmt.Errorf("watch EndpointSlices in %s: %w", ns, err)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					w.fail(fmt.Errorf("EndpointSlice watch in %s ended", ns))
					return
				}
				if es, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
					w.Observe(ev.Type, es)
				}
			}
		}
	}()
	return nil
}

func (w *Watcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// Err is why the watch stopped, if it did.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Observe takes one slice event, stamped now: when it changes its
// Service's ready addresses, that is recorded.
func (w *Watcher) Observe(t watch.EventType, es *discoveryv1.EndpointSlice) {
	at := w.now()
	svc := es.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t == watch.Deleted {
		delete(w.slices, es.Name)
	} else {
		w.slices[es.Name] = sliceState{service: svc, ready: readyAddresses(es)}
	}
	var ready []string
	for _, s := range w.slices {
		if s.service == svc {
			ready = append(ready, s.ready...)
		}
	}
	slices.Sort(ready)
	ready = slices.Compact(ready)
	obs := w.seen[svc]
	if n := len(obs); n > 0 && slices.Equal(obs[n-1].Ready, ready) {
		return
	}
	w.seen[svc] = append(obs, Observation{At: at, Ready: ready})
}

func readyAddresses(es *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range es.Endpoints {
		if ptr.Deref(e.Conditions.Ready, false) {
			out = append(out, e.Addresses...)
		}
	}
	return out
}

// First is the first observation of svc at or after since that satisfies
// ok.
func (w *Watcher) First(svc string, since time.Time, ok func(ready []string) bool) (Observation, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.seen[svc] {
		if !o.At.Before(since) && ok(o.Ready) {
			return o, true
		}
	}
	return Observation{}, false
}

// Has is a condition for First: addr is ready.
func Has(addr string) func([]string) bool {
	return func(ready []string) bool { return slices.Contains(ready, addr) }
}

// Lacks is a condition for First: addr is not ready.
func Lacks(addr string) func([]string) bool {
	return func(ready []string) bool { return !slices.Contains(ready, addr) }
}

// Any is a condition for First: some address is ready.
func Any(ready []string) bool { return len(ready) > 0 }
