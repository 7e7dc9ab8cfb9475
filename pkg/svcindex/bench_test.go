package svcindex

import (
	"fmt"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// benchServices returns n Services in 10.0.0.0/8, each with two TCP ports
// and a UDP one, like a typical cluster's mix.
func benchServices(n int) []*corev1.Service {
	out := make([]*corev1.Service, n)
	for i := range out {
		ip := addrOf(0x0a000000 + uint32(i) + 1).String()
		out[i] = svc(fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("svc-%d", i), []string{ip},
			tcp("http", 80, i8080), tcp("https", 443, sHTTP), corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
	}
	return out
}

func benchIndex(b *testing.B, svcs []*corev1.Service) *Index {
	x := bareIndex(b, Options{})
	x.setServiceCIDR(serviceCIDR("kubernetes", "10.0.0.0/8"))
	for _, s := range svcs {
		x.setService(s)
	}
	return x
}

// benchProbes mixes the four classes: half Known, the rest PortNotDeclared,
// NoService and External.
func benchProbes(n int) []netip.AddrPort {
	ps := make([]netip.AddrPort, 1024)
	for i := range ps {
		ip := addrOf(0x0a000000 + uint32(i*7919%n) + 1)
		switch i % 8 {
		case 0, 1, 2:
			ps[i] = netip.AddrPortFrom(ip, 80)
		case 3:
			ps[i] = netip.AddrPortFrom(ip, 443)
		case 4, 5:
			ps[i] = netip.AddrPortFrom(ip, 53) // UDP only: PortNotDeclared
		case 6:
			ps[i] = netip.AddrPortFrom(addrOf(0x0a000000+uint32(n+i)+1), 80) // NoService
		case 7:
			ps[i] = netip.AddrPortFrom(addrOf(0xc0a80000+uint32(i)), 80) // External
		}
	}
	return ps
}

var sink Result

// cpuTime is the process's user+system CPU time. On a shared, overloaded
// machine ns/op (wall time) counts the time other processes ran; cpu-ns/op
// does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			x := benchIndex(b, benchServices(n))
			ps := benchProbes(n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				sink = x.Lookup(ps[i&1023])
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkLookupParallel: lookups from every P at once, as the proxy's
// connection handlers would do.
func BenchmarkLookupParallel(b *testing.B) {
	x := benchIndex(b, benchServices(100_000))
	ps := benchProbes(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var r Result
		for i := 0; pb.Next(); i++ {
			r = x.Lookup(ps[i&1023])
		}
		_ = r
	})
}

// BenchmarkIndexMemory reports the heap the index itself holds per Service
// (entries, ports, maps). Names are shared with the Service objects, which
// the informer cache holds anyway, so they are not counted.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 100_000
	svcs := benchServices(n)
	var total uint64
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := benchIndex(b, svcs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		total += after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(x)
	}
	b.ReportMetric(float64(total)/float64(b.N)/n, "B/service")
	runtime.KeepAlive(svcs)
}

func TestLookupDoesNotAllocate(t *testing.T) {
	x := bareIndex(t, Options{})
	x.setServiceCIDR(serviceCIDR("kubernetes", "10.0.0.0/8"))
	for _, s := range benchServices(1000) {
		x.setService(s)
	}
	ps := benchProbes(1000)
	classes := map[Class]int{}
	for _, p := range ps {
		classes[x.Lookup(p).Class]++
	}
	if len(classes) != 4 {
		t.Fatalf("probes cover classes %v, want all four", classes)
	}
	if a := testing.AllocsPerRun(1000, func() {
		for _, p := range ps[:16] {
			sink = x.Lookup(p)
		}
	}); a != 0 {
		t.Errorf("Lookup allocates: %v allocs per 16 lookups", a)
	}
}
