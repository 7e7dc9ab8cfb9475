package agent_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/aether-mesh/svclb/agent"
)

// TestRunNamesTheFailedStep: Run's error says which of its steps failed, and keeps the cause.
// No apiserver: the steps before the informer caches need none.
func TestRunNamesTheFailedStep(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	nowhere := &rest.Config{Host: "http://127.0.0.1:1"} // nothing listens: the caches never sync
	for _, tc := range []struct {
		name     string
		httpAddr string
		step     string
		cause    error
	}{
		{"port taken", busy.Addr().String(), "http: ", syscall.EADDRINUSE},
		{"no apiserver", "127.0.0.1:0", "informer caches: ", context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := agent.Run(ctx, agent.Config{NodeName: "node-a", RestConfig: nowhere, HTTPAddr: tc.httpAddr,
				XDSSocket: t.TempDir() + "/xds.sock", Logger: testLogger(t, "agent")})
			if err == nil || !strings.HasPrefix(err.Error(), tc.step) || !errors.Is(err, tc.cause) {
				t.Fatalf("Run: %v; want an error starting %q, caused by %v", err, tc.step, tc.cause)
			}
		})
	}
}
