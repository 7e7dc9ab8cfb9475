package scale

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// podNet is one captured pod as the agent's own tests build it (agent/resilience_test.go
// newPodNet): a network namespace joined to the host by a veth pair with a /30, its TCP
// captured by internal/capture as svclb-capture and svclb-cni install it, its file linked into
// the agent's --netns-dir, where the agent finds it by the pod's address. The agent then gives
// it a capture listener, which the node proxy binds inside it: a connection the pod makes to
// a VIP takes the path every captured connection takes. The upstream leaves from the pod's own
// namespace too (svc: clusters bind it there), so the Service's backends are extra /32s on the
// host's end of the veth, which the pod reaches through its default route.
type podNet struct {
	ns            *netnstest.NS
	hostIf        string
	hostIP, podIP string
	backends      []netip.Addr
}

// newPodNet builds the namespace with backends extra host addresses and links it into
// netnsDir.
func newPodNet(t *testing.T, netnsDir string, backends int) *podNet {
	t.Helper()
	prereq.Command(t, "ip")
	if backends < 1 || backends > 250 {
		t.Fatalf("pod network: %d backends, want 1…250", backends)
	}
	ns := netnstest.New(t)
	var b [3]byte
	_, _ = rand.Read(b[:])
	// A random /30 in 10.218.0.0/16 and backends in 10.219.<b0>.0/24, apart from the ranges
	// of other packages' tests, which may run at the same time.
	p := &podNet{ns: ns, hostIf: fmt.Sprintf("svs%02x%02x%02x", b[0], b[1], b[2])}
	p.hostIP = fmt.Sprintf("10.218.%d.%d", b[0], b[1]&^3+1)
	p.podIP = fmt.Sprintf("10.218.%d.%d", b[0], b[1]&^3+2)
	ip := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("link", "add", p.hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns.Name())
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", p.hostIf).Run() })
	ip("addr", "add", p.hostIP+"/30", "dev", p.hostIf)
	for i := range backends {
		a := netip.AddrFrom4([4]byte{10, 219, b[0], byte(i + 1)})
		ip("addr", "add", a.String()+"/32", "dev", p.hostIf)
		p.backends = append(p.backends, a)
	}
	ip("link", "set", p.hostIf, "up")
	ip("-n", ns.Name(), "addr", "add", p.podIP+"/30", "dev", "eth0")
	ip("-n", ns.Name(), "link", "set", "eth0", "up")
	ip("-n", ns.Name(), "route", "add", "default", "via", p.hostIP)
	cfg := capture.DefaultConfig()
	cfg.NetNSPath = ns.Path()
	if err := capture.Install(cfg); err != nil {
		t.Fatalf("capture in %s: %v", ns.Name(), err)
	}
	if err := os.Symlink(ns.Path(), filepath.Join(netnsDir, ns.Name())); err != nil {
		t.Fatal(err)
	}
	return p
}

// dial connects from inside the pod's namespace: the socket is made there (and stays there);
// reads and writes need no switch.
func (p *podNet) dial(addr string, timeout time.Duration) (c net.Conn, err error) {
	err = p.ns.Do(func() error {
		c, err = net.DialTimeout("tcp4", addr, timeout)
		return err
	})
	return c, err
}

// echo is when the echo of one byte sent from the pod to vip came back (echoed).
func (p *podNet) echo(vip netip.AddrPort) (time.Time, error) {
	at, err := echoed(p.dial(vip.String(), heldTimeout))
	if err != nil {
		return at, fmt.Errorf("%s: %w", vip, err)
	}
	return at, nil
}

// createPod registers the pod on the harness's Node, captured and running with the pod's
// address, in namespace ns (which must exist).
func (p *podNet) createPod(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	// No controller-manager in envtest: the ServiceAccount admission plugin needs "default".
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("service account %s/default: %w", ns, err)
	}
	pod, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.CapturedLabel: "true"}},
		Spec: corev1.PodSpec{NodeName: harnessNode, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.podIP, PodIPs: []corev1.PodIP{{IP: p.podIP}}}
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pod %s/%s status: %w", ns, name, err)
	}
	return nil
}
