package svcindex

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// The multicluster (MCS API) ServiceImport, read through the dynamic client so
// the CRD's Go types are not a dependency.
var serviceImportGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "serviceimports"}

const (
	// ManagedImportLabel marks ServiceImports whose addresses the mesh already
	// serves through Services of its own; the index skips them.
	ManagedImportLabel = "aether.io/managed-service-import"
	clusterSetIPType   = "ClusterSetIP"
)

// importWatcher runs a dynamic informer for ServiceImports while discovery
// says the CRD is served. The CRD is optional: its absence is the normal case,
// so the watcher asks discovery again every recheck interval, and at once
// when the informer's watch fails (the CRD may have been removed).
type importWatcher struct {
	x       *Index
	dyn     dynamic.Interface
	disco   discovery.DiscoveryInterface
	recheck time.Duration
	kick    chan struct{}

	mu       sync.Mutex
	checked  bool                      // discovery answered (or failed) once
	informer cache.SharedIndexInformer // nil while the CRD is not served
	handler  cache.ResourceEventHandlerRegistration
	stop     context.CancelFunc
}

func newImportWatcher(x *Index, dyn dynamic.Interface, disco discovery.DiscoveryInterface) *importWatcher {
	return &importWatcher{x: x, dyn: dyn, disco: disco, recheck: 30 * time.Second, kick: make(chan struct{}, 1)}
}

func (w *importWatcher) hasSynced() bool {
	if w.dyn == nil || w.disco == nil {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.checked && (w.informer == nil || w.handler.HasSynced())
}

// run returns when ctx ends.
func (w *importWatcher) run(ctx context.Context) {
	if w.dyn == nil || w.disco == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(w.recheck)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			w.mu.Lock()
			if w.stop != nil {
				w.stop()
			}
			w.mu.Unlock()
			return
		case <-t.C:
		case <-w.kick:
		}
	}
}

func (w *importWatcher) check(ctx context.Context) {
	served, err := w.served()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checked = true
	switch {
	case err != nil:
		// Keep whatever runs: a flaky discovery call must not drop the /32s.
		w.x.log.Warn("cannot ask whether ServiceImports are served; will retry", "err", err, "retry", w.recheck)
	case served && w.informer == nil:
		w.x.log.Info("ServiceImport CRD is served; watching ClusterSetIP imports")
		w.startLocked(ctx)
	case !served && w.informer != nil:
		w.x.log.Info("ServiceImport CRD is no longer served; dropping its addresses from the range")
		w.stop()
		w.informer, w.handler, w.stop = nil, nil, nil
		w.x.mu.Lock()
		clear(w.x.imps)
		w.x.recomputeRangeLocked()
		w.x.mu.Unlock()
	}
}

func (w *importWatcher) served() (bool, error) {
	list, err := w.disco.ServerResourcesForGroupVersion(serviceImportGVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovery of %s: %w", serviceImportGVR.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == serviceImportGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

func (w *importWatcher) startLocked(ctx context.Context) {
	inf := dynamicinformer.NewFilteredDynamicInformer(w.dyn, serviceImportGVR, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = "!" + ManagedImportLabel }).Informer()
	_ = inf.SetWatchErrorHandler(func(r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	})
	x := w.x
	// Events still queued when this informer is stopped must not bring back
	// addresses check has cleared: handlers apply only while cctx lives.
	cctx, cancel := context.WithCancel(ctx)
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { x.setImport(cctx, o) },
		UpdateFunc: func(_, o any) { x.setImport(cctx, o) },
		DeleteFunc: func(o any) { x.deleteImport(cctx, o) },
	})
	if err != nil {
		// Only fails on a stopped informer, and this one has not started.
		cancel()
		x.log.Error("cannot watch ServiceImports", "err", err)
		return
	}
	w.informer, w.handler, w.stop = inf, reg, cancel
	go inf.RunWithContext(cctx)
}

// importAddrs returns the IPv4 ClusterSetIPs an import adds to the range.
func importAddrs(u *unstructured.Unstructured) []netip.Addr {
	if _, managed := u.GetLabels()[ManagedImportLabel]; managed {
		return nil
	}
	if t, _, _ := unstructured.NestedString(u.Object, "spec", "type"); t != clusterSetIPType {
		return nil // Headless (or unknown) imports have no virtual IP
	}
	ips, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "ips")
	var out []netip.Addr
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			out = append(out, a)
		}
	}
	return out
}

func (x *Index) setImport(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	x.putImport(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, importAddrs(u))
}

func (x *Index) deleteImport(ctx context.Context, obj any) {
	if key, ok := keyOf(obj); ok {
		x.putImport(ctx, key, nil)
	}
}

func (x *Index) putImport(ctx context.Context, key types.NamespacedName, addrs []netip.Addr) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if addrs == nil {
		if _, ok := x.imps[key]; !ok {
			return
		}
		delete(x.imps, key)
	} else {
		x.imps[key] = addrs
	}
	x.recomputeRangeLocked()
}
