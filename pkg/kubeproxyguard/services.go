package kubeproxyguard

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ServiceSetter receives the chosen Services; *Guard is one.
type ServiceSetter interface {
	SetServices([]types.NamespacedName)
}

// Selector selects the chosen Services.
var Selector = labels.SelectorFromSet(labels.Set{Label: LabelValue})

// WatchServices keeps s's Services equal to the Services labelled
// Label=LabelValue (in every namespace) until ctx ends. A Service whose label
// is removed or changed leaves the set. It needs list and watch on Services.
func WatchServices(ctx context.Context, client kubernetes.Interface, s ServiceSetter) error {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = Selector.String() }))
	inf := f.Core().V1().Services()
	lister := inf.Lister()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, n any) { poke(n) },
		DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watch Services: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	for {
		// The label selector already filters on the server; checking the
		// label again guards against a lister that holds a stale object.
		svcs, err := lister.List(Selector)
		if err != nil {
			return fmt.Errorf("list Services: %w", err)
		}
		s.SetServices(names(svcs))
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func names(svcs []*corev1.Service) []types.NamespacedName {
	r := make([]types.NamespacedName, 0, len(svcs))
	for _, s := range svcs {
		r = append(r, types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
	}
	sortNames(r)
	return r
}
