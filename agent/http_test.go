package agent_test

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/httpserve/httpservetest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestHTTPBounds: the agent's HTTP, which every pod reaches on the node's IP, answers on
// HTTPAddr and on HTTPLocalAddr (the node's own readers), and each listener serves at most
// contract.HTTPMaxConns connections at once: one more waits until one leaves.
func TestHTTPBounds(t *testing.T) {
	rc, _, ctx, _ := startAPIServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	addr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(dir, "xds.sock"), NetnsDir: dir,
		HTTPLocalAddr: local})
	for _, a := range []string{addr, local} {
		resp, err := http.Get("http://" + a + "/healthz")
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s/healthz: %s", a, resp.Status)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	for _, a := range []string{addr, local} {
		httpservetest.CheckCap(t, a, "/healthz", contract.HTTPMaxConns)
	}
}
