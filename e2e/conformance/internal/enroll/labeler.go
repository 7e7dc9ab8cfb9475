package enroll

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Labeler cuts every Service of the namespaces Selector matches by labelling
// it for the guard's label mode, as soon as the informer sees it: a stand-in
// for the guard's namespace-selector mode (CutGuard). default/kubernetes is
// left alone (the guard refuses it anyway).
type Labeler struct {
	CS       kubernetes.Interface
	Selector labels.Selector
	// Cut labels one Service (guard.Cut).
	Cut func(ctx context.Context, svc *corev1.Service) error
	Log func(format string, args ...any)
}

// Run labels until ctx ends; an error is returned only when it cannot start.
func (l *Labeler) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactory(l.CS, 0)
	svcs, nss := f.Core().V1().Services(), f.Core().V1().Namespaces()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	enqueue := func(o any) {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			q.Add(key)
		}
	}
	if _, err := svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) },
	}); err != nil {
		return fmt.Errorf("watch Services: %w", err)
	}
	// A namespace created after its Services were seen (never, in practice:
	// the framework creates the namespace first) or relabelled: look again.
	if _, err := nss.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			ns, ok := o.(*corev1.Namespace)
			if !ok {
				return
			}
			list, _ := svcs.Lister().Services(ns.Name).List(labels.Everything())
			for _, s := range list {
				enqueue(s)
			}
		},
	}); err != nil {
		return fmt.Errorf("watch Namespaces: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcs.Informer().HasSynced, nss.Informer().HasSynced) {
		return nil
	}
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	// cutFrom is the resourceVersion each Service (by key) was cut from: until the informer brings the
	// labelled version, a second event for the same version (a namespace's add listing it too)
	// finds it unlabelled in the lister and must not cut it again.
	cutFrom := map[string]string{}
	for {
		key, quit := q.Get()
		if quit {
			return nil
		}
		if err := l.sync(ctx, svcs.Lister(), nss.Lister(), key, cutFrom); err != nil && ctx.Err() == nil {
			l.Log("label %s: %v (retrying)", key, err)
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

func (l *Labeler) sync(ctx context.Context, svcs corelisters.ServiceLister, nss corelisters.NamespaceLister, key string, cutFrom map[string]string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	if ns == "default" && name == "kubernetes" {
		return nil
	}
	svc, err := svcs.Services(ns).Get(name)
	if err != nil {
		return nil // deleted since
	}
	if svc.Labels[contract.KubeProxyLabel] == contract.KubeProxyCut {
		return nil
	}
	if rv, ok := cutFrom[key]; ok && rv == svc.ResourceVersion {
		return nil // cut already; the lister has not seen the label yet
	}
	n, err := nss.Get(ns)
	if err != nil || !l.Selector.Matches(labels.Set(n.Labels)) {
		return nil
	}
	if err := l.Cut(ctx, svc.DeepCopy()); err != nil {
		return err
	}
	cutFrom[key] = svc.ResourceVersion
	return nil
}
