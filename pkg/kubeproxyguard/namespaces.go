package kubeproxyguard

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// apiServerService is never cut: it is how every pod, meshed or not, and every controller
// reaches the apiserver.
var apiServerService = types.NamespacedName{Namespace: "default", Name: "kubernetes"}

// WatchServicesByNamespace is WatchServices in namespace-selector mode: s's Services are those
// labelled Label=LabelValue plus every Service of a namespace nsSelector matches (the enrolled
// namespaces of svclb-cni: their pods are all meshed), never default/kubernetes. A namespace
// relabelled, or a Service created in an enrolled namespace, changes the set. It needs list
// and watch on Services and Namespaces.
func WatchServicesByNamespace(ctx context.Context, client kubernetes.Interface, nsSelector labels.Selector, s ServiceSetter) error {
	f := informers.NewSharedInformerFactory(client, 0)
	svcInf, nsInf := f.Core().V1().Services(), f.Core().V1().Namespaces()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf.Informer(), nsInf.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
		}); err != nil {
			return fmt.Errorf("watch Services and Namespaces: %w", err)
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.Informer().HasSynced, nsInf.Informer().HasSynced) {
		return ctx.Err()
	}
	for {
		nss, err := nsInf.Lister().List(nsSelector)
		if err != nil {
			return fmt.Errorf("list Namespaces: %w", err)
		}
		enrolled := map[string]bool{}
		for _, ns := range nss {
			enrolled[ns.Name] = true
		}
		svcs, err := svcInf.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list Services: %w", err)
		}
		var chosen []*corev1.Service
		for _, svc := range svcs {
			key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
			if key != apiServerService && (enrolled[svc.Namespace] || Selector.Matches(labels.Set(svc.Labels))) {
				chosen = append(chosen, svc)
			}
		}
		s.SetServices(names(chosen))
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}
