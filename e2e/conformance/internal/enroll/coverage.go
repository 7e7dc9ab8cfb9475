package enroll

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// FrameworkLabel is the label the e2e framework puts on every namespace it
// creates, its value the framework's base name (test/e2e/framework,
// CreateNamespace).
const FrameworkLabel = "e2e-framework"

// Coverage records the e2e framework's namespaces created while a phase runs
// and which of them the enrolling selector misses: a spec in such a namespace
// ran on plain kube-proxy, so its "green" proves nothing.
type Coverage struct {
	sel  labels.Selector
	stop chan struct{}

	mu     sync.Mutex
	seen   int
	missed []string
}

// WatchCoverage starts watching namespaces labelled FrameworkLabel and
// returns once its first list is in, so no namespace the phase creates is
// missed; Stop ends it.
func WatchCoverage(ctx context.Context, cs kubernetes.Interface, selector string) (*Coverage, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("namespace selector %q: %w", selector, err)
	}
	c := &Coverage{sel: sel, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = FrameworkLabel
	}))
	inf := f.Core().V1().Namespaces().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: c.add}); err != nil {
		return nil, fmt.Errorf("watch namespaces: %w", err)
	}
	f.Start(c.stop)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		close(c.stop)
		return nil, fmt.Errorf("watch namespaces: no first list within a minute: %w", sctx.Err())
	}
	return c, nil
}

func (c *Coverage) add(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	if _, ok := ns.Labels[FrameworkLabel]; !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen++
	if !c.sel.Matches(labels.Set(ns.Labels)) {
		c.missed = append(c.missed, fmt.Sprintf("%s (%s=%s)", ns.Name, FrameworkLabel, ns.Labels[FrameworkLabel]))
	}
}

// Stop ends the watch and returns how many framework namespaces it saw and
// those the selector missed, sorted.
func (c *Coverage) Stop() (seen int, missed []string) {
	close(c.stop)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.missed)
	slices.Sort(out)
	return c.seen, out
}
