package svcindex

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Small pools so that random sequences collide: shared ClusterIPs, CIDRs that
// nest and touch, IPv6 and junk in every field that takes an address.
var (
	fzIPs     = []string{"10.96.0.1", "10.96.0.2", "10.96.0.3", "10.97.0.1", "10.200.0.1", "192.168.0.1", "fd00::1", "None", "", "junk", "::ffff:10.96.0.1"}
	fzCIDRs   = []string{"10.96.0.0/30", "10.96.0.0/16", "10.97.0.0/24", "10.96.0.2/31", "10.200.0.1/32", "fd00::/64", "bogus", "0.0.0.0/0"}
	fzPorts   = []int32{80, 443, 53, 0, 70000}
	fzProtos  = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP, ""}
	fzNames   = []string{"a", "b", "c"}
	fzProbeIP = []string{"10.96.0.1", "10.96.0.2", "10.96.0.3", "10.96.0.4", "10.97.0.1", "10.97.0.255", "10.200.0.1", "192.168.0.1", "fd00::1", "0.0.0.0", "255.255.255.255"}
	fzProbePt = []uint16{80, 443, 53, 1, 0}
)

type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}
func (r *byteReader) done() bool { return r.i >= len(r.b) }

// FuzzIndex applies arbitrary sequences of Service, ServiceCIDR and
// ServiceImport events and, after each one, compares every probe with a naive
// model that recomputes the answer from the surviving objects.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 1, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 1, 1, 0, 0, 0, 1, 0, 2, 2, 0, 1, 0, 1, 0, 1, 2, 0, 0, 0})
	f.Add([]byte{0, 2, 0, 3, 0, 0, 2, 0, 0, 0, 4, 0, 1, 0, 4, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 0, 2, 0, 0, 0, 1, 1, 0, 0, 0, 0, 2, 0, 2, 0, 0, 0, 1, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		var opts Options
		m := newModel()
		if r.next()%2 == 1 {
			opts.RangeOverride = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/30"), netip.MustParsePrefix("10.97.0.0/24")}
			m.override = opts.RangeOverride
		}
		x := bareIndex(t, opts)
		ctx := context.Background()
		for step := 0; !r.done() && step < 64; step++ {
			op := r.next() % 6
			name := fzNames[r.next()%len(fzNames)]
			key := types.NamespacedName{Namespace: fzNames[r.next()%2], Name: name}
			var what string
			switch op {
			case 0:
				s := fzService(r, key)
				m.svcs[key] = s
				x.setService(s)
				what = fmt.Sprintf("set Service %s %v %v %v", key, s.Spec.Type, s.Spec.ClusterIPs, s.Spec.Ports)
			case 1:
				delete(m.svcs, key)
				x.deleteService(svc(key.Namespace, key.Name, nil))
				what = "delete Service " + key.String()
			case 2:
				cidrs := []string{fzCIDRs[r.next()%len(fzCIDRs)]}
				if r.next()%2 == 1 {
					cidrs = append(cidrs, fzCIDRs[r.next()%len(fzCIDRs)])
				}
				m.cidrs[name] = cidrs
				x.setServiceCIDR(serviceCIDR(name, cidrs...))
				what = fmt.Sprintf("set ServiceCIDR %s %v", name, cidrs)
			case 3:
				delete(m.cidrs, name)
				x.deleteServiceCIDR(serviceCIDR(name))
				what = "delete ServiceCIDR " + name
			case 4:
				typ := []string{"ClusterSetIP", "Headless", ""}[r.next()%3]
				var labels map[string]string
				if r.next()%3 == 0 {
					labels = map[string]string{ManagedImportLabel: ""}
				}
				u := serviceImport(key.Namespace, key.Name, typ, labels, fzIPs[r.next()%len(fzIPs)], fzIPs[r.next()%len(fzIPs)])
				m.imports[key] = u
				x.setImport(ctx, u)
				what = fmt.Sprintf("set ServiceImport %s %s %v", key, typ, labels)
			case 5:
				delete(m.imports, key)
				x.deleteImport(ctx, serviceImport(key.Namespace, key.Name, "", nil))
				what = "delete ServiceImport " + key.String()
			}
			m.check(t, x, step, what)
		}
	})
}

func fzService(r *byteReader, key types.NamespacedName) *corev1.Service {
	ips := []string{fzIPs[r.next()%len(fzIPs)]}
	if r.next()%3 == 0 {
		ips = append(ips, fzIPs[r.next()%len(fzIPs)])
	}
	var ports []corev1.ServicePort
	for n := r.next() % 4; n > 0; n-- {
		p := corev1.ServicePort{
			Name:     fmt.Sprintf("p%d", n),
			Port:     fzPorts[r.next()%len(fzPorts)],
			Protocol: fzProtos[r.next()%len(fzProtos)],
		}
		if t := r.next() % 3; t == 1 {
			p.TargetPort = intstr.FromInt32(8080)
		} else if t == 2 {
			p.TargetPort = intstr.FromString("named")
		}
		ports = append(ports, p)
	}
	s := svc(key.Namespace, key.Name, ips, ports...)
	if r.next()%4 == 0 {
		s.Spec.Type = corev1.ServiceTypeExternalName
	}
	if r.next()%3 == 0 {
		s.Spec.ClusterIPs = nil // old objects carry only clusterIP
	}
	return s
}

// model answers from first principles, with no incremental state.
type model struct {
	override []netip.Prefix
	svcs     map[types.NamespacedName]*corev1.Service
	cidrs    map[string][]string
	imports  map[types.NamespacedName]*unstructured.Unstructured
}

func newModel() *model {
	return &model{
		svcs:    map[types.NamespacedName]*corev1.Service{},
		cidrs:   map[string][]string{},
		imports: map[types.NamespacedName]*unstructured.Unstructured{},
	}
}

func (m *model) ipv4CIDRs() []netip.Prefix {
	if m.override != nil {
		return m.override
	}
	var out []netip.Prefix
	for _, cs := range m.cidrs {
		for _, c := range cs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
				out = append(out, p)
			}
		}
	}
	return out
}

func (m *model) inRange(a netip.Addr) (in, known bool) {
	cidrs := m.ipv4CIDRs()
	if len(cidrs) == 0 {
		return false, false
	}
	for _, p := range cidrs {
		if p.Contains(a) {
			return true, true
		}
	}
	for _, u := range m.imports {
		if _, managed := u.GetLabels()[ManagedImportLabel]; managed {
			continue
		}
		if t, _, _ := unstructured.NestedString(u.Object, "spec", "type"); t != "ClusterSetIP" {
			continue
		}
		ips, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "ips")
		for _, s := range ips {
			if b, err := netip.ParseAddr(s); err == nil && b.Is4() && b == a {
				return true, true
			}
		}
	}
	return false, true
}

// owner: the first Service by namespace/name whose first IPv4 ClusterIP is a.
func (m *model) owner(a netip.Addr) *corev1.Service {
	keys := make([]types.NamespacedName, 0, len(m.svcs))
	for k := range m.svcs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareNames)
	for _, k := range keys {
		s := m.svcs[k]
		if s.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ips := s.Spec.ClusterIPs
		if len(ips) == 0 {
			ips = []string{s.Spec.ClusterIP}
		}
		for _, ip := range ips {
			b, err := netip.ParseAddr(ip)
			if err != nil || !b.Is4() {
				continue
			}
			if b == a {
				return s
			}
			break // only the first IPv4 ClusterIP counts
		}
	}
	return nil
}

func (m *model) lookup(ap netip.AddrPort) Result {
	a := ap.Addr().Unmap()
	if !a.Is4() {
		return Result{}
	}
	if in, _ := m.inRange(a); !in {
		return Result{}
	}
	s := m.owner(a)
	if s == nil {
		return Result{Class: NoService}
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	for _, p := range s.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port > 0 && p.Port < 65536 && uint16(p.Port) == ap.Port() {
			t := p.TargetPort
			if t == (intstr.IntOrString{}) {
				t = intstr.FromInt32(p.Port)
			}
			return Result{Class: Known, Service: key, Port: ServicePort{Service: key, ClusterIP: a, Port: ap.Port(), PortName: p.Name, TargetPort: t}}
		}
	}
	return Result{Class: PortNotDeclared, Service: key}
}

func (m *model) check(t *testing.T, x *Index, step int, what string) {
	t.Helper()
	var wantPorts []ServicePort
	ps, known := x.Range()
	for _, ipS := range fzProbeIP {
		a := netip.MustParseAddr(ipS)
		in, mknown := m.inRange(a)
		if known != mknown {
			t.Fatalf("step %d (%s): Range known=%v, model %v", step, what, known, mknown)
		}
		inPs := slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) })
		if a.Is4() && inPs != in {
			t.Fatalf("step %d (%s): Range %v contains %s = %v, model %v", step, what, ps, a, inPs, in)
		}
		for _, port := range fzProbePt {
			ap := netip.AddrPortFrom(a, port)
			got, want := x.Lookup(ap), m.lookup(ap)
			if got != want {
				t.Fatalf("step %d (%s): Lookup(%s) = %+v, model %+v", step, what, ap, got, want)
			}
			if want.Class == Known {
				wantPorts = append(wantPorts, want.Port)
			}
		}
	}
	// Every probed Known port is listed by ServicePorts, and nothing listed
	// there looks up as anything but Known.
	all := x.ServicePorts()
	for _, p := range wantPorts {
		if !slices.Contains(all, p) {
			t.Fatalf("step %d (%s): ServicePorts() lacks %+v", step, what, p)
		}
	}
	for _, p := range all {
		if r := x.Lookup(netip.AddrPortFrom(p.ClusterIP, p.Port)); r.Class != Known || r.Port != p {
			t.Fatalf("step %d (%s): ServicePorts() lists %+v, Lookup says %+v", step, what, p, r)
		}
	}
}
