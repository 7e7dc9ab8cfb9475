package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/internal/testenv"
)

// TestRunAgainstAPIServer runs the whole agent against a real kube-apiserver: the first
// snapshot carries the Service's cluster, and a Phase 1 flip in the ConfigMap withdraws it
// on the running agent.
func TestRunAgainstAPIServer(t *testing.T) {
	rc := testenv.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := kubernetes.NewForConfigOrDie(rc)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapNamespace}}, metav1.CreateOptions{}))
	must(c.CoreV1().ConfigMaps(ConfigMapNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName},
		Data: map[string]string{"phase1": "true", "phase2": "true"}}, metav1.CreateOptions{}))
	must(c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{zoneLabel: "zone-a"}}}, metav1.CreateOptions{}))
	svc, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es := sliceObj("web", "web-1", "10.244.1.5", "10.244.2.5")
	es.Namespace = "default"
	must(c.DiscoveryV1().EndpointSlices("default").Create(ctx, es, metav1.CreateOptions{}))
	want := "svc:" + svc.Spec.ClusterIP + ":80"

	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "xds.sock")
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{NodeName: "node-a", RestConfig: rc, XDSSocket: sock, HTTPAddr: "127.0.0.1:0",
			NetnsDir: dir, Phase1: false, Debounce: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("xDS socket never appeared")
		case <-time.After(50 * time.Millisecond):
		}
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType}); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	recv := func() *discoverygrpc.DeltaDiscoveryResponse {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(&discoverygrpc.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		for _, x := range r.Resources {
			have[x.Name] = true
		}
		for _, n := range r.RemovedResources {
			delete(have, n)
		}
		return r
	}
	// The ConfigMap (phase1 true) overrides the Config default (false) before the first push.
	recv()
	if !have[want] || !have["passthrough_original_dst"] {
		t.Fatalf("first snapshot clusters %v, want %s and passthrough_original_dst", have, want)
	}
	cm, err := c.CoreV1().ConfigMaps(ConfigMapNamespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["phase1"] = "false"
	if cm, err = c.CoreV1().ConfigMaps(ConfigMapNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for have[want] {
		if r := recv(); slices.Contains(r.RemovedResources, want) {
			break
		}
	}
	// Phase 1 on again: the cluster comes back on the same running agent.
	cm.Data["phase1"] = "true"
	must(c.CoreV1().ConfigMaps(ConfigMapNamespace).Update(ctx, cm, metav1.UpdateOptions{}))
	for !have[want] {
		recv()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
}
