package kubeproxyguard

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// ChosenSetter receives the chosen Services and the namespace selector they were chosen by;
// *Guard is one.
type ChosenSetter interface {
	ServiceSetter
	SetNamespaceSelector(NamespaceSelectorStatus)
}

// WatchServicesByNamespace is WatchServices in namespace-selector mode: s's Services are
// those labelled Label=LabelValue, as in WatchServices, plus every Service of a namespace the
// selector matches (the namespaces svclb-cni enrolls: all their pods are meshed) except those
// Refuse names: default/kubernetes is never chosen for its namespace (labelled, the Guard
// refuses it as in label mode). The selector is the agent's: its ConfigMap
// (contract.AgentConfigMap in contract.Namespace, key contract.KeyNamespaceSelector), read by
// the agent's rule (internal/nsselector: absent is contract.DefaultNamespaceSelector, "" is
// every namespace, a bad value keeps the last good one and is reported), unless sel.Override
// says otherwise. A change of the ConfigMap, a namespace relabelled, or a Service created in
// an enrolled namespace changes the set. It needs list and watch on Services and Namespaces,
// and on that ConfigMap.
func WatchServicesByNamespace(ctx context.Context, client kubernetes.Interface, sel NamespaceSelection, s ChosenSetter) error {
	f := informers.NewSharedInformerFactory(client, 0)
	cmf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(contract.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", contract.AgentConfigMap).String()
		}))
	svcInf, nsInf, cmInf := f.Core().V1().Services(), f.Core().V1().Namespaces(), cmf.Core().V1().ConfigMaps()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf.Informer(), nsInf.Informer(), cmInf.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
		}); err != nil {
			return fmt.Errorf("watch Services, Namespaces and ConfigMap %s/%s: %w", contract.Namespace, contract.AgentConfigMap, err)
		}
	}
	f.Start(ctx.Done())
	cmf.Start(ctx.Done())
	defer f.Shutdown()
	defer cmf.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.Informer().HasSynced, nsInf.Informer().HasSynced, cmInf.Informer().HasSynced) {
		return ctx.Err()
	}
	src := newSelectorSource(sel)
	for {
		cm, err := cmInf.Lister().ConfigMaps(contract.Namespace).Get(contract.AgentConfigMap)
		if err != nil {
			cm = nil // absent: the agent's defaults
		}
		nsSel, st := src.read(cm)
		nss, err := nsInf.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list Namespaces: %w", err)
		}
		enrolled := map[string]bool{}
		for _, ns := range nss {
			enrolled[ns.Name] = nsSel.Matches(ns.Labels)
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
		// The selector first: /status never shows a set under a selector it was not chosen by
		// for longer than this loop takes.
		s.SetNamespaceSelector(st)
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
