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

// WatchServicesByNamespace is WatchServices in namespace-selector mode: s's Services are those
// labelled Label=LabelValue, as in WatchServices, plus every Service of a namespace nsSelector
// matches (the namespaces svclb-cni enrolls: all their pods are meshed) except those Refuse
// names: default/kubernetes is never chosen for its namespace (labelled, the Guard refuses it
// as in label mode). A namespace relabelled, or a Service created in an enrolled namespace,
// changes the set. It needs list and watch on Services and Namespaces.
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
			if chosenIn(svc, enrolled[svc.Namespace]) {
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

// Chosen reports whether the guard chooses svc, whose namespace is labelled nsLabels, in
// namespace-selector mode nsSelector (nil: label mode, WatchServices): what the watchers
// feed a Guard, for a caller that must tell the same (the e2e evidence).
func Chosen(svc *corev1.Service, nsLabels map[string]string, nsSelector labels.Selector) bool {
	return chosenIn(svc, nsSelector != nil && nsSelector.Matches(labels.Set(nsLabels)))
}

// chosenIn: labelled, or in an enrolled namespace and not refused.
func chosenIn(svc *corev1.Service, enrolled bool) bool {
	if Selector.Matches(labels.Set(svc.Labels)) {
		return true
	}
	return enrolled && Refuse(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}) == ""
}
