package svcindex

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// ProxiedSelector is kube-proxy's own selector of the Services and EndpointSlices it serves
// (cmd/kube-proxy/app/server.go, newProxyServer: noProxyName, noHeadlessEndpoints): none
// labelled service.kubernetes.io/service-proxy-name (another proxy's) or
// service.kubernetes.io/headless (the EndpointSlice controller's mark for a headless
// Service's slices, and a user's way to say "no virtual IP").
func ProxiedSelector() labels.Selector {
	noProxyName, err := labels.NewRequirement(contract.ServiceProxyNameLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant key
	}
	noHeadless, err := labels.NewRequirement(corev1.IsHeadlessService, selection.DoesNotExist, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*noProxyName, *noHeadless)
}

// ProxiedOnly registers factory's Service and EndpointSlice informers with ProxiedSelector, so
// everything that later asks factory for them (New, the agent's listers) sees only what
// kube-proxy serves. It must run before anything else asks factory for those informers: a
// factory keeps the first informer registered for a type.
func ProxiedOnly(factory informers.SharedInformerFactory) {
	sel := ProxiedSelector().String()
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = sel }
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	factory.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, resync, indexers, tweak)
	})
	factory.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, resync, indexers, tweak)
	})
}
