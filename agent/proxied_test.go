package agent_test

import (
	"path/filepath"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestRunServesOnlyWhatKubeProxyServes: a Service labelled service.kubernetes.io/service-proxy-name
// (another proxy's) or service.kubernetes.io/headless gets no svc: cluster, as kube-proxy
// gives it no rules; the label removed, it gets one (upstream's "should implement
// service.kubernetes.io/service-proxy-name" and "… headless" do both).
func TestRunServesOnlyWhatKubeProxyServes(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	must(c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{"phase1": "true", "phase2": "true"}}, metav1.CreateOptions{}))
	must(c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}))
	web := createService(ctx, t, c, "web", 80)
	setSlice(ctx, t, c, "web", 8080, ready("10.244.1.5"))
	labelled := map[string]*corev1.Service{}
	for name, label := range map[string]string{"other": contract.ServiceProxyNameLabel, "hl": corev1.IsHeadlessService} {
		svc := createService(ctx, t, c, name, 80)
		svc.Labels = map[string]string{label: "foo-bar"}
		svc, err := c.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setSlice(ctx, t, c, name, 8080, ready("10.244.1.6"))
		labelled[name] = svc
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "xds.sock")
	startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: sock, NetnsDir: dir, Phase1: true, Debounce: 10 * time.Millisecond})
	cl, _, _ := dialAgent(ctx, t, sock)
	has := func(svc *corev1.Service) bool {
		return cl.Has(resourcev3.ClusterType, "svc:"+svc.Spec.ClusterIP+":80")
	}
	adstest.Eventually(t, "web's cluster", func() bool { return has(web) })
	for name, svc := range labelled {
		if has(svc) {
			t.Errorf("%s (labels %v) got a cluster: kube-proxy does not serve it", name, svc.Labels)
		}
	}
	// Unlabelled, each is a Service like any other.
	for name, svc := range labelled {
		svc.Labels = nil
		if _, err := c.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		adstest.Eventually(t, name+"'s cluster once unlabelled", func() bool { return has(svc) })
	}
}
