package refuse

import (
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestPortNotDeclared: a SYN to a served VIP on a port it does not declare is reset before any
// socket sees it, and counted under that VIP:port; its declared ports, another VIP's ports and
// port 53 (the capture leaves it to kube-proxy) connect; a port declared later connects, and a
// VIP that leaves the set is refused on no port.
func TestPortNotDeclared(t *testing.T) {
	p := newPod(t)
	declared, undeclared, dns := netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(vip, 81), netip.AddrPortFrom(vip, contract.DNSPort)
	accDeclared, accUndeclared, accDNS := p.listen(t, 80), p.listen(t, 81), p.listen(t, contract.DNSPort)
	if err := Install(p.nft, Sets{VIPs: []netip.Addr{vip}, Declared: []netip.AddrPort{declared}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.dial(undeclared); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s (not declared): %v, want ECONNREFUSED", undeclared, err)
		}
	}
	for _, to := range []netip.AddrPort{declared, dns} {
		if err := p.dial(to); err != nil {
			t.Fatalf("dial %s: %v", to, err)
		}
	}
	got, err := Counts(p.nft)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NotDeclared) != 1 || got.NotDeclared[undeclared] != 2 || len(got.NoEndpoints) != 0 {
		t.Fatalf("counts %+v, want not-declared %s: 2 and nothing else", got, undeclared)
	}

	// Declared later: it connects, its record keeps its count.
	if err := Update(p.nft, Sets{Declared: []netip.AddrPort{undeclared}}, Sets{}); err != nil {
		t.Fatal(err)
	}
	if err := p.dial(undeclared); err != nil {
		t.Fatalf("dial %s once declared: %v", undeclared, err)
	}
	if got, err = Counts(p.nft); err != nil || got.NotDeclared[undeclared] != 2 {
		t.Fatalf("counts after the port was declared: %+v %v, want %s: 2", got, err, undeclared)
	}
	// The VIP leaves: no port of it is refused.
	if err := Update(p.nft, Sets{}, Sets{VIPs: []netip.Addr{vip}, Declared: []netip.AddrPort{declared, undeclared}}); err != nil {
		t.Fatal(err)
	}
	accOther := p.listen(t, 82)
	if err := p.dial(netip.AddrPortFrom(vip, 82)); err != nil {
		t.Fatalf("dial %s:82 after the VIP left: %v", vip, err)
	}
	waitFor(t, func() bool { return accDeclared() == 1 && accUndeclared() == 1 && accDNS() == 1 && accOther() == 1 },
		"the listeners accept exactly the connections not refused")
}

// TestPortNotDeclaredOtherVIP: an address that is no served VIP is never refused, whatever
// its port; the no-endpoints set and the port-not-declared rule count apart.
func TestPortNotDeclaredOtherVIP(t *testing.T) {
	p := newPod(t)
	other := netip.MustParseAddr("10.96.0.11")
	p.ns.LoopbackAddr(t, other)
	empty := netip.AddrPortFrom(vip, 80)
	p.listen(t, 80)
	l := listenOn(t, p, netip.AddrPortFrom(other, 81))
	if err := Install(p.nft, Sets{NoEndpoints: []netip.AddrPort{empty}, VIPs: []netip.Addr{vip}, Declared: []netip.AddrPort{empty}}); err != nil {
		t.Fatal(err)
	}
	if err := p.dial(netip.AddrPortFrom(other, 81)); err != nil {
		t.Fatalf("dial %s:81 (no served VIP): %v", other, err)
	}
	for _, to := range []netip.AddrPort{empty, netip.AddrPortFrom(vip, 9)} {
		if err := p.dial(to); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", to, err)
		}
	}
	got, err := Counts(p.nft)
	if err != nil {
		t.Fatal(err)
	}
	if got.NoEndpoints[empty] != 1 || len(got.NotDeclared) != 1 || got.NotDeclared[netip.AddrPortFrom(vip, 9)] != 1 {
		t.Fatalf("counts %+v, want no-endpoints %s: 1, not-declared %s:9: 1", got, empty, vip)
	}
	waitFor(t, func() bool { return l() == 1 }, "the other address's listener accepts its one connection")
}

// TestPortNotDeclaredFullRecord: once the record of refused destinations is full, a SYN to yet
// another undeclared port is still reset; only its count is missing.
func TestPortNotDeclaredFullRecord(t *testing.T) {
	p := newPod(t)
	if err := Install(p.nft, Sets{VIPs: []netip.Addr{vip}}); err != nil {
		t.Fatal(err)
	}
	for port := range uint16(UndeclaredMax + 10) {
		to := netip.AddrPortFrom(vip, 1000+port)
		if err := p.dial(to); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s (%d-th undeclared port): %v, want ECONNREFUSED", to, port+1, err)
		}
	}
	got, err := Counts(p.nft)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NotDeclared) != UndeclaredMax {
		t.Fatalf("%d destinations recorded, want the bound %d", len(got.NotDeclared), UndeclaredMax)
	}
}

// TestTableGolden pins the table as nft lists it (testdata/table.golden; -update rewrites it).
func TestTableGolden(t *testing.T) {
	prereq.Command(t, "nft")
	p := newPod(t)
	if err := Install(p.nft, Sets{
		NoEndpoints: []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:8080")},
		VIPs:        []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.20")},
		Declared: []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:80"), netip.MustParseAddrPort("10.96.0.10:8080"),
			netip.MustParseAddrPort("10.96.0.20:443")},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nsenter", "--net="+p.ns.Path(), "nft", "list", "table", "ip", TableName).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	golden.Check(t, filepath.Join("testdata", "table.golden"), out)
}

// listenOn is pod.listen on another address of the pod's lo.
func listenOn(t *testing.T, p *pod, at netip.AddrPort) (accepted func() int) {
	t.Helper()
	var l net.Listener
	if err := p.ns.Do(func() (err error) {
		l, err = net.Listen("tcp", at.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return countAccepts(l)
}

// TestRefusesAgreesWithTheRule: Sets.Refuses, which the agent's tests read the table with,
// says of each destination what the kernel does with its SYN; List reads back what Install
// wrote.
func TestRefusesAgreesWithTheRule(t *testing.T) {
	p := newPod(t)
	other := netip.MustParseAddr("10.96.0.11")
	p.ns.LoopbackAddr(t, other)
	s := Sets{
		NoEndpoints: []netip.AddrPort{netip.AddrPortFrom(vip, 8080)},
		VIPs:        []netip.Addr{vip},
		Declared:    []netip.AddrPort{netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(vip, 8080)},
	}
	if err := Install(p.nft, s); err != nil {
		t.Fatal(err)
	}
	if got, err := List(p.nft); err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("List: %+v %v, want %+v", got, err, s)
	}
	for _, d := range []netip.AddrPort{netip.AddrPortFrom(vip, 80), netip.AddrPortFrom(vip, 81), netip.AddrPortFrom(vip, 8080),
		netip.AddrPortFrom(vip, contract.DNSPort), netip.AddrPortFrom(other, 80), netip.AddrPortFrom(other, 81)} {
		listenOn(t, p, d)
		_, refused := s.Refuses(d)
		if err := p.dial(d); refused != errors.Is(err, syscall.ECONNREFUSED) || (!refused && err != nil) {
			t.Errorf("dial %s: %v; Refuses says refused=%v", d, err, refused)
		}
	}
}
