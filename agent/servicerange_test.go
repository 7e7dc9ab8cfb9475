package agent_test

import (
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/fixtures/metrics"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// rangeWarning is the start of the agent's warning that it does not know the Service range.
const rangeWarning = `level=WARN msg="Service range unknown`

// TestRunServiceRangeUnknown runs the agent against an apiserver whose only ServiceCIDR is
// IPv6 (the agent's Service range is IPv4): it warns once, however many syncs follow, and
// svclb_service_range_known is 0; an IPv4 ServiceCIDR makes the range known (gauge 1, /status).
func TestRunServiceRangeUnknown(t *testing.T) {
	rc := testenv.Start(t, testenv.Options{APIServerArgs: map[string][]string{
		"service-cluster-ip-range": {"fd00:10:96::/112"},
		"advertise-address":        {"::1"}, // the apiserver wants its own address in the primary Service family
	}})
	kube := kubernetes.NewForConfigOrDie(rc)
	ctx := t.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contract.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logs := &lockedBuffer{}
	addr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(dir, "xds.sock"), NetnsDir: dir,
		Phase1: true, Phase2: true, Debounce: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	g := gomega.NewWithT(t)
	known := func() float64 {
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
		if err != nil || m[contract.MetricServiceRangeKnown] == nil {
			return -1
		}
		return m.Sum(contract.MetricServiceRangeKnown, nil)
	}
	if st := status(t, addr); st.RangeKnown {
		t.Fatalf("range known with only an IPv6 ServiceCIDR: %v", st.Range)
	}
	g.Expect(known()).To(gomega.Equal(0.0), contract.MetricServiceRangeKnown)

	// More syncs (a phase flip each), still one warning.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap, Namespace: contract.Namespace},
		Data: map[string]string{contract.KeyPhase2: "false"}}
	if _, err := kube.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() bool { return status(t, addr).Phase2 }, 30*time.Second, 20*time.Millisecond).Should(gomega.BeFalse())
	cm.Data[contract.KeyPhase2] = "true"
	if _, err := kube.CoreV1().ConfigMaps(contract.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() bool { return status(t, addr).Phase2 }, 30*time.Second, 20*time.Millisecond).Should(gomega.BeTrue())
	if n := strings.Count(logs.String(), rangeWarning); n != 1 {
		t.Fatalf("%d warnings that the range is unknown, want 1:\n%s", n, logs.String())
	}

	// An IPv4 ServiceCIDR: known.
	if _, err := kube.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "ipv4"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.97.0.0/16"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.Eventually(known, 30*time.Second, 20*time.Millisecond).Should(gomega.Equal(1.0), contract.MetricServiceRangeKnown)
	st := status(t, addr)
	g.Expect(st.RangeKnown).To(gomega.BeTrue())
	g.Expect(st.Range).To(gomega.Equal([]string{"10.97.0.0/16"}))
	g.Expect(logs.String()).To(gomega.ContainSubstring(`level=INFO msg="Service range known" range=[10.97.0.0/16]`))
	g.Expect(strings.Count(logs.String(), rangeWarning)).To(gomega.Equal(1))
}
