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
// deleted, or without the installer any more is an uninstall, and so are credentials refused
// (the ServiceAccount deleted first) or withdrawn; an apiserver that may only be unavailable
// (an error, throttling, no answer) keeps it, as does an answer that says nothing of the
// DaemonSet.
func TestInstallerWanted(t *testing.T) {
	const path = "/apis/apps/v1/namespaces/svclb-system/daemonsets/svclb-node"
	const (
		answer  = iota
		hang    // no answer before the caller's deadline
		refused // nothing listens
	)
	for _, tc := range []struct {
		name   string
		server int
		status int
		body   string
		want   bool
		err    bool
	}{
		{"rolling update", answer, 200, `{"spec":{"template":{"spec":{"initContainers":[{"name":"cni-install"}]}}}}`, true, false},
		{"CNI turned off", answer, 200, `{"spec":{"template":{"spec":{"containers":[{"name":"agent"}]}}}}`, false, false},
		{"being deleted", answer, 200, `{"metadata":{"deletionTimestamp":"2026-11-30T16:00:00Z"},"spec":{"template":{"spec":{"initContainers":[{"name":"cni-install"}]}}}}`, false, false},
		{"undecodable", answer, 200, `{"spec":`, true, true},
		{"deleted", answer, 404, `{}`, false, false},
		{"RBAC withdrawn with CNI", answer, 403, `{}`, false, false},
		{"ServiceAccount deleted", answer, 401, `{}`, false, false},
		{"apiserver error", answer, 500, `{}`, true, true},
		{"bad gateway", answer, 502, `{}`, true, true},
		{"apiserver unavailable", answer, 503, `{}`, true, true},
		{"gateway timeout", answer, 504, `{}`, true, true},
		{"throttled", answer, 429, `{}`, true, true},
		{"gone (a resourceVersion, not the DaemonSet)", answer, 410, `{}`, true, true},
		{"bad request", answer, 400, `{}`, true, true},
		{"timeout", hang, 0, "", true, true},
		{"connection refused", refused, 0, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != path || r.Header.Get("Authorization") != "Bearer tok" {
					http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
					return
				}
				if tc.server == hang {
					<-release
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			defer close(release) // before Close, which waits for the hung handler
			pool := x509.NewCertPool()
			pool.AddCert(srv.Certificate())
			w := &InstallerWanted{APIServer: srv.URL, Token: "tok", CAPool: pool, Namespace: contract.Namespace, DaemonSet: contract.NodeDaemonSet, Container: "cni-install"}
			if tc.server == refused {
				srv.Close()
			}
			timeout := 30 * time.Second
			if tc.server == hang {
				timeout = 200 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			got, err := w.Wanted(ctx)
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("Wanted = %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestInstallerWantedReadsTheTokenFile: the token is read at each call, not kept from the
// start: the kubelet rotates it, and an expired copy's 401 would read as an uninstall.
func TestInstallerWantedReadsTheTokenFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer rotated" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"spec":{"template":{"spec":{"initContainers":[{"name":"cni-install"}]}}}}`))
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &InstallerWanted{APIServer: srv.URL, TokenFile: file, CAPool: pool, Namespace: contract.Namespace, DaemonSet: contract.NodeDaemonSet, Container: "cni-install"}
	if err := os.WriteFile(file, []byte("rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Wanted(context.Background()); !got || err != nil {
		t.Fatalf("Wanted = %v, %v after the token rotated; want true", got, err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Wanted(context.Background()); !got || err == nil {
		t.Fatalf("Wanted = %v, %v without a token file; want true and an error", got, err)
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
