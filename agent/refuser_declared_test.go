package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// listenersAt gives the netns each address on lo and a listener on each destination, so a
// refused connect is the refuse table's doing and any other connects.
func listenersAt(t *testing.T, ns *netnstest.NS, dsts ...netip.AddrPort) {
	t.Helper()
	added := map[netip.Addr]bool{}
	for _, d := range dsts {
		if !added[d.Addr()] {
			added[d.Addr()] = true
			ns.LoopbackAddr(t, d.Addr())
		}
		var l net.Listener
		if err := ns.Do(func() (err error) { l, err = net.Listen("tcp4", d.String()); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
	}
}

func dialIn(ns *netnstest.NS, d netip.AddrPort) error {
	return ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", d.String(), 2*time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// TestRefuserRefusesUndeclaredPorts: with refusal reset, a captured pod's connect to a Service's
// VIP on a port the Service does not declare fails with ECONNREFUSED, counted as
// port-not-declared under the Service and logged with the VIP:port and the pod; its declared
// port, TCP/53, the apiserver's Service (kube-proxy's), a VIP outside the Service range and
// an address no Service holds connect as before.
func TestRefuserRefusesUndeclaredPorts(t *testing.T) {
	ns := netnstest.New(t)
	vip, apiVIP, outside, free := "10.96.0.10", "10.96.0.1", "10.97.0.5", "10.96.0.77"
	at := func(ip string, port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr(ip), port) }
	undeclared := at(vip, 81)
	open := []netip.AddrPort{at(vip, 80), at(vip, contract.DNSPort), at(apiVIP, 80), at(outside, 81), at(free, 81)}
	listenersAt(t, ns, append([]netip.AddrPort{undeclared}, open...)...)

	f := newFixture(t)
	logs := &syncLog{}
	f.s.refuser.log = slog.New(slog.NewJSONHandler(logs, nil))
	type add struct {
		reason string
		svc    k8stypes.NamespacedName
		n      uint64
	}
	var added []add
	f.s.refuser.add = func(reason string, svc k8stypes.NamespacedName, n uint64) { added = append(added, add{reason, svc, n}) }
	f.s.netns = fakeNetns{netip.MustParseAddr("10.244.1.3"): ns.Path()}
	f.s.reset = true
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	_ = f.services.Add(svcObj("web", vip))
	_ = f.slices.Add(sliceObj("web", "web-1", "10.244.1.5"))
	api := svcObj(contract.APIServerName, apiVIP)
	api.Namespace = contract.APIServerNamespace
	_ = f.services.Add(api)
	_ = f.services.Add(svcObj("far", outside))
	headless := svcObj("headless", corev1.ClusterIPNone)
	_ = f.services.Add(headless)
	f.sync(t)

	for range 2 {
		if err := dialIn(ns, undeclared); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s (port not declared): %v, want ECONNREFUSED", undeclared, err)
		}
	}
	for _, d := range open {
		if err := dialIn(ns, d); err != nil {
			t.Errorf("dial %s: %v, want a connection", d, err)
		}
	}
	f.s.refuser.collect()
	web := k8stypes.NamespacedName{Namespace: "ns", Name: "web"}
	if len(added) != 1 || added[0] != (add{contract.ReasonPortNotDeclared, web, 2}) {
		t.Fatalf("counted %v, want %s of %s: 2", added, contract.ReasonPortNotDeclared, web)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, contract.LogRefusal) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]any{contract.LogKeyReason: contract.ReasonPortNotDeclared, contract.LogKeyNamespace: "ns", contract.LogKeyService: "web",
		contract.LogKeyDestination: undeclared.String(), contract.LogKeySourcePod: "ns/client", contract.LogKeyFlag: contract.FlagReset}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("refusal line %v: %s is %v, want %v", line, k, line[k], v)
		}
	}

	// The setting off: the port is closed after accept again (the table goes).
	f.s.setRefusal(false)
	f.sync(t)
	if err := dialIn(ns, undeclared); err != nil {
		t.Fatalf("refusal close: dial %s: %v, want a connection (the capture's, in a meshed pod)", undeclared, err)
	}
}

// declaredPub checks, at each push, that the pod's table refuses none of the Service ports the
// push publishes, fills or deletes (the proxy serves each until the push lands): a port enters
// the declared set, and a VIP leaves, before the push; a port leaves the declared set, and a
// VIP enters, after it.
type declaredPub struct {
	t      *testing.T
	path   string
	pushes int
	fail   bool // refuse the push
}

func (p *declaredPub) Apply(u xdsserver.Update) error {
	p.pushes++
	sets, ok := tableAt(p.t, p.path)
	if ok {
		names := append(slices.Collect(maps.Keys(u.Clusters)), u.DeleteClusters...)
		for _, n := range names {
			d, err := contract.ParseClusterName(n)
			if err != nil {
				continue
			}
			if reason, refused := sets.Refuses(d); refused && reason == contract.ReasonPortNotDeclared {
				p.t.Errorf("push %d carries %s while the pod's table refuses %s as %s (sets %+v)", p.pushes, n, d, reason, sets)
			}
		}
	}
	if p.fail {
		return errors.New("push refused")
	}
	return nil
}

// TestRefuserDeclaredOrder: the declared set and the VIPs follow the Service's ports around
// each push (declaredPub checks every push): a port added, a port removed, the Service
// deleted and created again; a push that fails leaves the table as the last good push had it.
func TestRefuserDeclaredOrder(t *testing.T) {
	ns := netnstest.New(t)
	f := newFixture(t)
	pub := &declaredPub{t: t, path: ns.Path()}
	f.s.pub = pub
	f.s.netns = fakeNetns{netip.MustParseAddr("10.244.1.3"): ns.Path()}
	f.s.reset = true
	_ = f.pods.Add(podObj("client", "node-a", "10.244.1.3", true))
	vip := netip.MustParseAddr("10.96.0.10")
	web := func(ports ...int32) *corev1.Service {
		s := svcObj("web", vip.String())
		s.Spec.Ports = nil
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Port: p, Protocol: corev1.ProtocolTCP})
		}
		return s
	}
	refuses := func(port uint16, want string, what string) {
		t.Helper()
		sets, ok := tableAt(t, ns.Path())
		if !ok {
			t.Fatalf("%s: no refuse table", what)
		}
		got, _ := sets.Refuses(netip.AddrPortFrom(vip, port))
		if got != want {
			t.Fatalf("%s: %s:%d refused as %q, want %q (sets %+v)", what, vip, port, got, want, sets)
		}
	}
	change := func(svc *corev1.Service, del bool) {
		t.Helper()
		if del {
			_ = f.services.Delete(svc)
		} else if _, ok, _ := f.services.Get(svc); ok {
			_ = f.services.Update(svc)
		} else {
			_ = f.services.Add(svc)
		}
		f.s.serviceChanged(svc)
	}
	change(web(80), false)
	f.sync(t)
	refuses(81, contract.ReasonPortNotDeclared, "port 81 not declared")
	refuses(80, contract.ReasonNoEndpoints, "port 80 without endpoints")

	change(web(80, 81), false)
	f.sync(t)
	refuses(81, contract.ReasonNoEndpoints, "port 81 declared (no endpoints)")
	change(web(81), false)
	f.sync(t)
	refuses(80, contract.ReasonPortNotDeclared, "port 80 no longer declared")

	// A push that fails: port 82 stays refused as the proxy never learnt it.
	pub.fail = true
	change(web(81, 82), false)
	if err := f.s.sync(); err == nil {
		t.Fatal("the sync did not fail")
	}
	refuses(82, contract.ReasonPortNotDeclared, "after the failed push that would declare port 82")
	refuses(81, contract.ReasonNoEndpoints, "after the failed push, port 81")
	pub.fail = false
	f.s.serviceChanged(web(81, 82))
	f.sync(t)
	refuses(82, contract.ReasonNoEndpoints, "port 82 once the push landed")

	change(web(81, 82), true)
	f.sync(t)
	refuses(83, "", "the Service gone: no port of its VIP")
	change(web(80), false)
	f.sync(t)
	refuses(83, contract.ReasonPortNotDeclared, "the Service back")
	if pub.pushes < 6 {
		t.Fatalf("%d pushes, want at least 6", pub.pushes)
	}
}
