package agent_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/fixtures/metrics"
	"github.com/aether-mesh/svclb/internal/refuse"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestRunRefusesAtSyn runs the whole agent against a real kube-apiserver with refusal: reset
// and a captured pod in a real netns (capture installed): the pod's refuse set holds the
// VIP:port of a Service without endpoints, and a connect to it from the pod fails with
// ECONNREFUSED, counted in svclb_svc_refused_total{reason="no-endpoints"}, and so does a connect
// to a port the Service does not declare (reason port-not-declared), while no port of another
// proxy's Service is refused; an endpoint takes the VIP:port out of the set; refusal: close
// deletes the table.
func TestRunRefusesAtSyn(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	pod := newPodNet(t)
	netnsDir := t.TempDir()
	if err := os.Symlink(pod.ns.Path(), filepath.Join(netnsDir, pod.ns.Name())); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{contract.KeyPhase1: "true", contract.KeyPhase2: "true", contract.KeyRefusal: contract.RefusalReset}}
	cm, err := c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	must(cm, err)
	const port = 80
	svc := createService(ctx, t, c, "empty", port)
	dst := netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), port)
	createPod(ctx, t, c, "client", pod.podIP)
	// Another proxy's Service: the agent does not serve it (svcindex.ProxiedOnly), so no port
	// of its VIP is refused.
	other, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{contract.ServiceProxyNameLabel: "someone-else"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: port, Protocol: corev1.ProtocolTCP}}}},
		metav1.CreateOptions{})
	must(other, err)

	addr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(t.TempDir(), "xds.sock"),
		NetnsDir: netnsDir, Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond})
	g := gomega.NewWithT(t)
	set := func() (map[netip.AddrPort]uint64, error) {
		nft, release, err := refuse.Open(pod.ns.Path())
		if err != nil {
			return nil, err
		}
		defer release()
		c, err := refuse.Counts(nft)
		return c.NoEndpoints, err
	}
	inSet := func() bool { s, err := set(); _, ok := s[dst]; return err == nil && ok }
	g.Eventually(inSet).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "%s in the pod's refuse set", dst)
	if st := status(t, addr); st.Refusal != contract.RefusalReset || st.RefusedAtSyn != 1 {
		t.Fatalf("/status refusal %q refusedAtSyn %d, want %q 1", st.Refusal, st.RefusedAtSyn, contract.RefusalReset)
	}
	undeclared := netip.AddrPortFrom(dst.Addr(), port+1)
	for _, d := range []netip.AddrPort{dst, dst, undeclared, undeclared, undeclared} {
		if err := pod.ns.Do(func() error {
			conn, err := net.DialTimeout("tcp4", d.String(), 3*time.Second)
			if err == nil {
				_ = conn.Close()
			}
			return err
		}); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s from the pod: %v, want ECONNREFUSED", d, err)
		}
	}
	nft, release, err := refuse.Open(pod.ns.Path())
	if err != nil {
		t.Fatal(err)
	}
	sets, err := refuse.List(nft)
	release()
	if err != nil {
		t.Fatal(err)
	}
	if otherVIP := netip.MustParseAddr(other.Spec.ClusterIP); slices.Contains(sets.VIPs, otherVIP) || !slices.Contains(sets.VIPs, dst.Addr()) {
		t.Fatalf("the table's VIPs %v: want %s (served) and not %s (another proxy's)", sets.VIPs, dst.Addr(), otherVIP)
	}
	g.Eventually(func() float64 { return refusedAs(t, addr, contract.ReasonPortNotDeclared, "empty") }).WithTimeout(3*contract.RefuseCountEvery).
		WithPolling(100*time.Millisecond).Should(gomega.Equal(3.0), "the three port-not-declared resets counted")

	// An endpoint: out of the set (its counter read as it goes: no wait for the ticker).
	setSlice(ctx, t, c, "empty", 8080, ready("10.244.9.9"))
	g.Eventually(inSet).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.BeFalse(), "%s out of the set", dst)
	g.Eventually(func() float64 { return refusedAs(t, addr, contract.ReasonNoEndpoints, "empty") }).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).
		Should(gomega.Equal(2.0), "the two resets counted")

	// The endpoint goes: back in the set.
	setSlice(ctx, t, c, "empty", 8080)
	g.Eventually(inSet).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(gomega.BeTrue(), "%s back in the set", dst)

	// refusal: close: the table goes.
	cm.Data[contract.KeyRefusal] = contract.RefusalClose
	must(c.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}))
	g.Eventually(func() error { _, err := set(); return err }).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).
		Should(gomega.HaveOccurred(), "the refuse table deleted with refusal: close")
}

// refusedAs is svclb_svc_refused_total{reason} of Service default/name.
func refusedAs(t *testing.T, addr, reason, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	m, err := metrics.Parse(b)
	if err != nil {
		t.Fatal(fmt.Errorf("/metrics: %w", err))
	}
	return m.Sum(contract.MetricSvcRefused, map[string]string{contract.LabelReason: reason,
		contract.LabelNamespace: "default", contract.LabelService: name})
}
