package cniinstall

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestInstallerWanted: an update of the DaemonSet keeps the plugin; a DaemonSet gone, being
// deleted, or without the installer any more is an uninstall; an apiserver error keeps it.
func TestInstallerWanted(t *testing.T) {
	const path = "/apis/apps/v1/namespaces/svclb-system/daemonsets/svclb-node"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   bool
		err    bool
	}{
		{"rolling update", 200, `{"spec":{"template":{"spec":{"initContainers":[{"name":"cni-install"}]}}}}`, true, false},
		{"CNI turned off", 200, `{"spec":{"template":{"spec":{"containers":[{"name":"agent"}]}}}}`, false, false},
		{"being deleted", 200, `{"metadata":{"deletionTimestamp":"2026-11-30T16:00:00Z"},"spec":{"template":{"spec":{"initContainers":[{"name":"cni-install"}]}}}}`, false, false},
		{"deleted", 404, `{}`, false, false},
		{"RBAC withdrawn with CNI", 403, `{}`, false, false},
		{"apiserver error", 500, `{}`, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != path || r.Header.Get("Authorization") != "Bearer tok" {
					http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			pool := x509.NewCertPool()
			pool.AddCert(srv.Certificate())
			w := &InstallerWanted{APIServer: srv.URL, Token: "tok", CAPool: pool, Namespace: contract.Namespace, DaemonSet: contract.NodeDaemonSet, Container: "cni-install"}
			got, err := w.Wanted(context.Background())
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("Wanted = %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestRunKeepsThePluginWhenStillWanted: a stop during an update leaves binary and entry.
func TestRunKeepsThePluginWhenStillWanted(t *testing.T) {
	in := node(t)
	in.Wanted = func(context.Context) (bool, error) { return true, nil }
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("not installed")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !hasEntry(t, filepath.Join(in.ConfDir, contract.CNIConfFile)) {
		t.Error("the entry was removed although the plugin is still wanted")
	}
	if _, err := os.Stat(filepath.Join(in.BinDir, contract.CNIPluginType)); err != nil {
		t.Errorf("binary: %v", err)
	}
}
