package guardcmd

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/internal/httpserve/httpservetest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage:"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"delete"}, 2, "NS/NAME"},
		{[]string{"watch", "default"}, 2, "want NAMESPACE/NAME"},
		{[]string{"delete", "Default/demo"}, 2, "namespace"},
		{[]string{"delete", "default/a/b"}, 2, "want NAMESPACE/NAME"},
		{[]string{"delete", "default/9demo"}, 2, "Service name"},
		{[]string{"run", "extra"}, 2, "unexpected arguments"},
		{[]string{"delete", "default/demo", "default/kubernetes"}, 2, `"default/kubernetes": refusing: the apiserver's Service`},
		{[]string{"watch", "default/kubernetes"}, 2, "stays on kube-proxy's path"},
		{[]string{"list", "-h"}, 0, "-json"},
		{[]string{"run", "-namespace-selector", "svclb.dev/mesh in (enabled"}, 2, "-namespace-selector"},
		{[]string{"run", "-namespace-selector="}, 2, "an empty selector selects every namespace"},
		{[]string{"run", "-h"}, 0, "-namespace-selector"},
		{[]string{"run", "-cut=some"}, 2, `-cut "some": want all or proxy`},
		{[]string{"run", "-h"}, 0, "-cut"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%q: code %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}

func TestParseServices(t *testing.T) {
	got, err := parseServices([]string{"default/demo", "kube-system/kube-dns"})
	if err != nil || len(got) != 2 || got[1].Namespace != "kube-system" || got[1].Name != "kube-dns" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestNamespaceSelection: without the flag the agent's ConfigMap decides; with it, it is an
// override; an empty or malformed one is a usage error (the empty selector is "every
// namespace" to the agent and was "none" to the flag before: never read two ways).
func TestNamespaceSelection(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		override string // "-": none
		bad      bool
	}{
		{nil, "-", false},
		{[]string{"-namespace-selector=" + contract.DefaultNamespaceSelector}, contract.DefaultNamespaceSelector, false},
		{[]string{"-namespace-selector", "team in (a,b)"}, "team in (a,b)", false},
		{[]string{"-namespace-selector= "}, "", true},
		{[]string{"-namespace-selector=!"}, "", true},
	} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		v := fs.String("namespace-selector", "", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		sel, err := namespaceSelection(fs, *v)
		switch {
		case tc.bad:
			if err == nil {
				t.Errorf("%q: accepted", tc.args)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.override == "-" && sel.Override != nil:
			t.Errorf("%q: override %q, want the agent's ConfigMap", tc.args, sel.Override.Text)
		case tc.override != "-" && (sel.Override == nil || sel.Override.Text != tc.override):
			t.Errorf("%q: override %+v, want %q", tc.args, sel.Override, tc.override)
		}
	}
}

// TestListenDefaultsToLoopback: `run` serves on 127.0.0.1 whatever the pod's environment
// says (on hostNetwork any other address is the node's, which every pod reaches), and `get`
// reads it there.
func TestListenDefaultsToLoopback(t *testing.T) {
	for _, ip := range []string{"10.89.0.3", ""} {
		t.Setenv(podIPEnv, ip)
		var out, errb bytes.Buffer
		if code := Main(context.Background(), []string{"run", "-h"}, &out, &errb); code != 0 {
			t.Fatalf("run -h: code %d: %s", code, errb.String())
		}
		_, usage, _ := strings.Cut(errb.String(), "-listen string")
		usage, _, _ = strings.Cut(usage, "\n  -")
		if want := `(default "127.0.0.1:9751")`; !strings.Contains(usage, want) {
			t.Errorf("%s=%q: -listen %q, want %s", podIPEnv, ip, strings.TrimSpace(usage), want)
		}
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"get", "-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), `default "127.0.0.1:9751"`) {
		t.Errorf("get -h: code %d, %q: want the default 127.0.0.1:9751", code, errb.String())
	}
}

// TestServeCapsConnections: the guard's HTTP, which every pod reaches on the node's IP,
// serves at most contract.HTTPMaxConns connections at once; one more waits.
func TestServeCapsConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	go func() { done <- serve(ctx, addr, ok, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("guard HTTP on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	http.DefaultClient.CloseIdleConnections()
	httpservetest.CheckCap(t, addr, "/healthz", contract.HTTPMaxConns)
}

// podIPEnv is where a DaemonSet would put the pod's IP (downward API status.podIP): the
// listen address must not follow it.
const podIPEnv = "POD_IP"
