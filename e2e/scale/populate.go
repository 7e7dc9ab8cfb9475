package scale

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Spec is the population: Services ClusterIP Services (one TCP port, 80 → 8080) in Namespace,
// each with one EndpointSlice of Endpoints ready endpoints.
type Spec struct {
	Namespace string
	Services  int
	Endpoints int // per Service
	Workers   int // parallel creators (default 8)
}

// endpointBase is the first endpoint address: 10.128.0.0/9 holds 8M distinct addresses,
// outside testenv's Service range (10.96.0.0/16), so no endpoint is mistaken for a VIP.
var endpointBase = netip.MustParseAddr("10.128.0.0")

// Objects returns Service i and its EndpointSlice. Endpoint addresses are unique across the
// population (kube-proxy makes one chain per endpoint; shared addresses would hide that cost).
func (s Spec) Objects(i int) (*corev1.Service, *discoveryv1.EndpointSlice, error) {
	name := fmt.Sprintf("svc-%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			Type: corev1.ServiceTypeClusterIP},
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	base := binary.BigEndian.Uint32(endpointBase.AsSlice())
	for j := range s.Endpoints {
		n := uint64(i)*uint64(s.Endpoints) + uint64(j)
		if n >= 1<<23 {
			return nil, nil, fmt.Errorf("endpoint %d of Service %d: beyond the 10.128.0.0/9 endpoint range", j, i)
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], base+uint32(n))
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{netip.AddrFrom4(a).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return svc, es, nil
}

// Populate creates the namespace and every Service and EndpointSlice with Workers parallel
// creators; progress (may be nil) is called with the number of Services done so far after
// each one. It stops at the first error.
func Populate(ctx context.Context, kube kubernetes.Interface, s Spec, progress func(done int)) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}},
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", s.Namespace, err)
	}
	return Grow(ctx, kube, s, 0, progress)
}

// Grow creates Services from … s.Services-1 and their EndpointSlices in the existing namespace,
// as Populate does (a population grown step by step); progress counts from 0 again.
func Grow(ctx context.Context, kube kubernetes.Interface, s Spec, from int, progress func(done int)) error {
	if from < 0 || from > s.Services {
		return fmt.Errorf("growing from Service %d to %d: out of range", from, s.Services)
	}
	if s.Workers <= 0 {
		s.Workers = 8
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range s.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := s.create(ctx, kube, i); err != nil {
					cancel(err)
					return
				}
				if n := done.Add(1); progress != nil {
					progress(int(n))
				}
			}
		}()
	}
feed:
	for i := from; i < s.Services; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil { // a worker failed, or the caller gave up
		return fmt.Errorf("populating, %d of Services %d…%d done: %w", done.Load(), from, s.Services-1, context.Cause(ctx))
	}
	return nil
}

func (s Spec) create(ctx context.Context, kube kubernetes.Interface, i int) error {
	svc, es, err := s.Objects(i)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Services(s.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("service %s/%s: %w", s.Namespace, svc.Name, err)
	}
	if _, err := kube.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("endpointslice %s/%s: %w", s.Namespace, es.Name, err)
	}
	return nil
}
