package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
)

const (
	// heldPort is the echo servers' port, the EndpointSlice's; the Service's is 80.
	heldPort = 8080
	// heldTimeout bounds each connection (connect to first byte) and each held one's opening.
	heldTimeout = 5 * time.Second
	// heldSettle lets the proxy settle after the held connections are opened, before its memory
	// and fds are read and the new connections start.
	heldSettle = 5 * time.Second
	// heldOpeners open the held connections in parallel (a level's worth is not measured).
	heldOpeners = 16
	// heldErrorSamples is how many failed connections' errors a level keeps.
	heldErrorSamples = 5
)

// TestHeld is "connection latency under held connections" (docs/perf.md, "How cost grows"):
// one Service with SVCLB_SCALE_ENDPOINTS echo servers (default 4), served by the node proxy
// to one captured pod (podNet: the agent's capture listener in the pod's namespace, TPROXY,
// Phase 1 and 2 on); idle connections are held open through the proxy in steps
// (SVCLB_SCALE_HELD, default 0,100,1000), and at each step SVCLB_SCALE_CONNS new connections
// (default 2000) are opened from the pod at SVCLB_SCALE_CONN_RATE per second (default 100), an
// open loop. Each writes one byte and reads its echo: setup to first byte, measured from when
// the connection was due. As many direct connections from the host's namespace to the echo
// servers run beside them, in the same window at the same rate: the machine's share of the
// tail. It records p50/p99/p99.9 of both and the proxy's VmRSS, fds and CPU at each step, logs
// a table and rewrites HeldFile in the perf results directory.
func TestHeld(t *testing.T) {
	if !env.On("SVCLB_SCALE") {
		t.Skip("set SVCLB_SCALE=1 (make scale-held) to measure new connections' latency through the node proxy while connections are held open")
	}
	levels, err := ParseLevels(env.String("SVCLB_SCALE_HELD", "0,100,1000"))
	if err != nil {
		t.Fatal(err)
	}
	endpoints := env.Positive("SVCLB_SCALE_ENDPOINTS", 4)
	conns := env.Positive("SVCLB_SCALE_CONNS", 2000)
	rate := env.Float("SVCLB_SCALE_CONN_RATE", 100)
	if rate <= 0 {
		t.Fatalf("SVCLB_SCALE_CONN_RATE=%g: want a positive rate", rate)
	}
	h, ctx, out := startRun(t, 50*time.Minute)

	const ns = "held"
	pod := startPod(t, ctx, h, ns, endpoints)
	vip, err := createEchoService(ctx, h.kube, ns, "echo", pod.backends)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's defaults (Phase 1 and 2, proactive CDS), with envtest's Service range given
	// rather than read from its ServiceCIDR: without a range every connection passes through.
	ag, _, sock := h.startAgent(t, "--service-range="+testenv.ServiceClusterIPRange)
	px, admin := h.startNodeProxy(t, sock)

	g := &scaleresult.Held{RunInfo: runInfo(t), Endpoints: endpoints, Rate: rate, Conns: conns, Timeout: heldTimeout}
	save := saver(t, g, out)
	probe := func(context.Context) (time.Time, error) { return pod.echo(vip) }

	// Ready: the pod's connection to the VIP is proxied to an echo server (passed through, it
	// would find nothing at the VIP).
	var last error
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if _, last = probe(ctx); last == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no echo through %s from the pod within 3m: %v; agent log:\n%s\nnode proxy log:\n%s", vip, last, tail(ag.log, 20), tail(px.log, 20))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-px.done:
			t.Fatalf("svclb-nodeproxy exited; log tail:\n%s", tail(px.log, 30))
		case <-time.After(500 * time.Millisecond):
		}
	}
	// A warm-up at the same rate, not recorded: the first connections pay for the proxy's and
	// this process's pools and stacks growing.
	warm := max(conns/10, 50)
	if _, errs, _, err := OpenLoop(ctx, warm, rate, probe); err != nil || len(errs) > 0 {
		t.Fatalf("warm-up: %d of %d failed (%v), %v", len(errs), warm, errors.Join(errs...), err)
	}
	t.Logf("%s ready (%d echo servers); warm-up of %d connections at %g/s done", vip, endpoints, warm, rate)
	g.Notes = append(g.Notes, fmt.Sprintf("a warm-up of %d connections at the rate before the first level, not recorded", warm))

	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for _, n := range levels {
		more, err := openHeld(pod, vip.String(), n-len(held))
		held = append(held, more...)
		if err != nil {
			g.Broke = fmt.Sprintf("opening held connections %d…%d: %v", len(held), n, err)
			save()
			t.Fatal(g.Broke)
		}
		time.Sleep(heldSettle)
		l := scaleresult.HeldLevel{Held: n}
		st, err := getStats("http://" + admin + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range st {
			if strings.HasPrefix(k, "cluster.") && strings.HasSuffix(k, ".upstream_cx_active") {
				l.Active += v
			}
		}
		if l.NodeProxy, err = ReadMemory(px.pid); err != nil {
			t.Fatal(err)
		}
		if l.NodeProxyFDs, err = CountFDs(px.pid); err != nil {
			t.Fatal(err)
		}
		before := cpuOf(t, px)
		// Beside them, in the same window and at the same rate, direct connections from this
		// (the host's) namespace to the echo servers: what the machine alone adds to the tail.
		var dlat []time.Duration
		var derrs []error
		var derr error
		var dn atomic.Int64
		directDone := make(chan struct{})
		go func() {
			defer close(directDone)
			dlat, derrs, _, derr = OpenLoop(ctx, conns, rate, func(context.Context) (time.Time, error) {
				return direct(pod.backends[int(dn.Add(1))%len(pod.backends)])
			})
		}()
		lat, errs, lag, err := OpenLoop(ctx, conns, rate, probe)
		<-directDone
		if err != nil || derr != nil {
			t.Fatal(errors.Join(err, derr))
		}
		l.CPUSeconds = cpuOf(t, px).Sub(before).Total().Seconds()
		l.Latency, l.Errors, l.Lag = scaleresult.Summarize(lat), len(errs), lag
		l.Direct, l.DirectErrors = scaleresult.Summarize(dlat), len(derrs)
		for _, e := range errs[:min(len(errs), heldErrorSamples)] {
			l.ErrorSamples = append(l.ErrorSamples, e.Error())
		}
		l.LoadAfter = loadavg(t)
		g.Levels = append(g.Levels, l)
		g.Duration = time.Since(g.Started)
		save()
		t.Logf("with %d held (%d active upstream at the proxy), %d new at %g/s:\n%s", n, l.Active, conns, rate, g.Table())
	}
	// The held connections must have lasted: a proxy that dropped them would have measured
	// the levels with fewer.
	var lost int
	for _, c := range held {
		if _, err := c.Write([]byte{'h'}); err != nil || firstByte(c, time.Now().Add(heldTimeout)) != nil {
			lost++
		}
	}
	if lost > 0 {
		g.Notes = append(g.Notes, fmt.Sprintf("%d of %d held connections no longer echoed at the end", lost, len(held)))
	}
	g.LoadAfter = loadavg(t)
	g.Duration = time.Since(g.Started)
	save()
	t.Logf("new connections under held ones, %d echo servers, %d each at %g/s (open loop), load %.2f → %.2f (1 min) on %d CPUs; "+
		"%d held lost; %s in %s\n%s", endpoints, conns, rate, g.LoadBefore[0], g.LoadAfter[0], g.CPUs, lost, scaleresult.HeldFile, out, g.Table())
	if lost > 0 {
		t.Errorf("%d of %d held connections lost", lost, len(held))
	}
}

// direct is one connection from the host's namespace straight to the echo server at a, timed
// to the echo of its first byte.
func direct(a netip.Addr) (time.Time, error) {
	return echoed(net.DialTimeout("tcp4", netip.AddrPortFrom(a, heldPort).String(), heldTimeout))
}

// echoed is when the echo of one byte written on c came back (within heldTimeout), c and err
// as a dial returned them; it closes c.
func echoed(c net.Conn, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	if err := firstByte(c, time.Now().Add(heldTimeout)); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// firstByte writes one byte on c and reads its echo, by deadline.
func firstByte(c net.Conn, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.Write([]byte{'x'}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("first byte: %w", err)
	}
	return c.SetDeadline(time.Time{})
}

// openHeld opens n connections from the pod to addr, heldOpeners at a time, each checked with
// one echo and then left idle.
func openHeld(pod *podNet, addr string, n int) ([]net.Conn, error) {
	var mu sync.Mutex
	var out []net.Conn
	var errs []error
	next := make(chan struct{})
	var wg sync.WaitGroup
	for range heldOpeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				c, err := pod.dial(addr, heldTimeout)
				if err == nil {
					if err = firstByte(c, time.Now().Add(heldTimeout)); err != nil {
						c.Close()
					}
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					out = append(out, c)
				}
				mu.Unlock()
			}
		}()
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return out, fmt.Errorf("%d of %d failed: %w", len(errs), n, errs[0])
	}
	return out, nil
}

// serveEcho runs an echo server on each address at heldPort (in this, the host's, namespace)
// until the test ends.
func serveEcho(t *testing.T, addrs []netip.Addr) {
	for _, a := range addrs {
		l, err := net.Listen("tcp4", netip.AddrPortFrom(a, heldPort).String())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		open := map[net.Conn]bool{}
		t.Cleanup(func() {
			l.Close()
			mu.Lock()
			for c := range open {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				open[c] = true
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = io.Copy(c, c)
					c.Close()
					mu.Lock()
					delete(open, c)
					mu.Unlock()
				}()
			}
		}()
	}
}

// createNamespace creates namespace ns.
func createNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// createEchoService creates Service ns/name (port 80 → heldPort) and one EndpointSlice with a
// ready endpoint at each address, and returns the VIP:port.
func createEchoService(ctx context.Context, kube kubernetes.Interface, ns, name string, addrs []netip.Addr) (netip.AddrPort, error) {
	svc, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "echo", Port: 80,
			TargetPort: intstr.FromInt32(heldPort), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	vip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s: ClusterIP %q: %w", ns, name, svc.Spec.ClusterIP, err)
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("echo"), Port: ptr.To[int32](heldPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}})
	}
	if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpointslice %s/%s: %w", ns, es.Name, err)
	}
	return netip.AddrPortFrom(vip, 80), nil
}
