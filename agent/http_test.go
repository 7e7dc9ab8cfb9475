package agent_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/internal/httpserve/httpservetest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestHTTPBounds: the agent's HTTP answers on HTTPAddr and serves at most
// contract.HTTPMaxConns connections at once: one more waits until one leaves.
func TestHTTPBounds(t *testing.T) {
	rc, _, ctx, _ := startAPIServer(t)
	dir := t.TempDir()
	addr, _ := startAgent(ctx, t, agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(dir, "xds.sock"), NetnsDir: dir})
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s/healthz: %s", addr, resp.Status)
	}
	http.DefaultClient.CloseIdleConnections()
	httpservetest.CheckCap(t, addr, "/healthz", contract.HTTPMaxConns)
}
