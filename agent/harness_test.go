// The harness of the agent's tests against a real kube-apiserver: the agent run until the test
// ends, the built-in proxy's ADS client recording what the agent sends, API objects, and /status.

package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/adsclient"
	"github.com/aether-mesh/svclb/internal/testing/adstest"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const node = "node-a"

// startAgent runs agent.Run until the returned stop (also called at cleanup) and waits until
// it is ready (first snapshot built, xDS socket open). An empty cfg.HTTPAddr takes a free
// loopback port; the address the agent bound is returned.
func startAgent(ctx context.Context, t *testing.T, cfg agent.Config) (httpAddr string, stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t, "agent")
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	bound := make(chan net.Addr, 1)
	cfg.Ready = func(a net.Addr) { bound <- a }
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = agent.Run(ctx, cfg)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if runErr != nil {
				t.Errorf("agent: %v", runErr)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-bound:
		return a.String(), stop
	case <-done:
		t.Fatalf("the agent stopped before it was ready: %v", runErr)
		return "", nil
	}
}

// dialAgent runs the built-in proxy's ADS client (node node) on the agent's socket until ctx
// ends, recording what it is sent; the connection carries ALS too.
func dialAgent(ctx context.Context, t *testing.T, sock string) (*adstest.Recorder, *adsclient.Client, *grpc.ClientConn) {
	t.Helper()
	rec := adstest.NewRecorder()
	c := &adsclient.Client{Node: &corev3.Node{Id: contract.NodeID(node), Cluster: contract.NodeCluster}, Handler: rec,
		StreamEnded: rec.StreamEnded, Logger: testLogger(t, "ADS client")}
	return rec, c, adstest.Start(ctx, t, sock, c)
}

func createService(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string, port int) *corev1.Service {
	t.Helper()
	svc, err := kube.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: int32(port), Protocol: corev1.ProtocolTCP}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func ready(ip string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}
}

func terminating(ip string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}}
}

// setSlice creates or replaces Service name's only EndpointSlice.
func setSlice(ctx context.Context, t *testing.T, kube kubernetes.Interface, name string, port int32, eps ...discoveryv1.Endpoint) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
	api := kube.DiscoveryV1().EndpointSlices("default")
	old, err := api.Get(ctx, es.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, es, metav1.CreateOptions{})
	case err == nil:
		es.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx, es, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("endpointslice %s: %v", es.Name, err)
	}
}

func status(t *testing.T, addr string) agentstatus.Status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatalf("/status: %v", err)
	}
	defer resp.Body.Close()
	var s agentstatus.Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return s
}

func get(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// testLogger collects warnings and errors and shows them if the test failed (goroutines may
// still log after the test body returned, where t.Log would panic).
func testLogger(t *testing.T, who string) *slog.Logger {
	var mu sync.Mutex
	var b strings.Builder
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() && b.Len() > 0 {
			t.Logf("%s log:\n%s", who, b.String())
		}
	})
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return b.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
