package cniplugin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/aether-mesh/svclb/fixtures/capture"
	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/enroll/enrolltest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// writeView writes the agent's namespace view as the agent does (spelled out here: the file
// is a contract between two binaries, and this is its golden form): meshNS enrolled, "plain"
// known and not.
func writeView(t *testing.T, path string) {
	t.Helper()
	view := `{"version":1,"selector":"svclb.dev/mesh=enabled","generation":7,"writtenAt":"2025-01-02T03:04:05Z",` +
		`"enrolled":["` + meshNS + `"],"notEnrolled":["default","plain"]}` + "\n"
	if err := os.WriteFile(path, []byte(view), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantRefused asserts err is the plugin's TryAgainLater naming the agent's socket and each of
// also in its details.
func wantRefused(t *testing.T, what string, err error, socket string, also ...string) {
	t.Helper()
	var ce *types.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: want a CNI error, got %v", what, err)
	}
	t.Logf("%s: %s: %s", what, ce.Msg, ce.Details)
	if ce.Code != types.ErrTryAgainLater || !strings.Contains(ce.Details, socket) {
		t.Errorf("%s: want code %d naming %s, got %+v", what, types.ErrTryAgainLater, socket, ce)
	}
	for _, s := range also {
		if !strings.Contains(ce.Details, s) {
			t.Errorf("%s: details %q do not say %q", what, ce.Details, s)
		}
	}
}

// TestAgentDownNotEnrolledNamespaceStarts: with the agent's socket gone, a pod of a namespace
// its view says is not enrolled gets the main plugin's result (ADD, CHECK and DEL, at once);
// a pod of an enrolled namespace, or of one the view does not know (created after it was
// written), is refused naming the socket, and nothing is installed.
func TestAgentDownNotEnrolledNamespaceStarts(t *testing.T) {
	ns := netnstest.New(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	writeView(t, viewPath(missing))
	stdin := conf(missing, ns.Path(), "")

	var out bytes.Buffer
	p := &Plugin{Stdout: &out}
	start := time.Now()
	if err := p.Add(cmdArgs(ns.Path(), "plain", stdin)); err != nil {
		t.Fatalf("ADD of a pod of a namespace not enrolled, agent down: %v", err)
	}
	samePrev(t, out.Bytes(), ns.Path())
	if err := p.Check(cmdArgs(ns.Path(), "plain", stdin)); err != nil {
		t.Errorf("CHECK of a pod of a namespace not enrolled, agent down: %v", err)
	}
	if err := p.Del(cmdArgs(ns.Path(), "plain", stdin)); err != nil {
		t.Errorf("DEL: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ADD, CHECK and DEL of a pod not enrolled took %s with the agent down", d)
	}
	if err := capture.Absent(ns.Path()); err != nil {
		t.Errorf("a pod that is not enrolled: %v", err)
	}

	for _, namespace := range []string{meshNS, "fresh"} {
		err := (&Plugin{Stdout: &bytes.Buffer{}}).Add(cmdArgs(ns.Path(), namespace, stdin))
		wantRefused(t, "ADD in namespace "+namespace, err, missing)
		wantRefused(t, "CHECK in namespace "+namespace, p.Check(cmdArgs(ns.Path(), namespace, stdin)), missing)
		if err := capture.Absent(ns.Path()); err != nil {
			t.Errorf("namespace %s, agent unreachable: %v", namespace, err)
		}
	}
}

// TestNotEnrolledByTheViewDoesNotAskTheAgent: a running agent is not asked about a pod of a
// namespace its view says is not enrolled; it is asked about the others.
func TestNotEnrolledByTheViewDoesNotAskTheAgent(t *testing.T) {
	ns := netnstest.New(t)
	asked := map[string]int{}
	agent := enrolltest.Start(t, &enrolltest.Agent{Decider: func(p enroll.Pod) enroll.Decision {
		asked[p.Namespace]++
		return enrollMesh(p)
	}})
	writeView(t, viewPath(agent.Socket))
	stdin := conf(agent.Socket, ns.Path(), "")
	p := &Plugin{Stdout: &bytes.Buffer{}}
	for _, namespace := range []string{"plain", "fresh"} {
		if err := p.Add(cmdArgs(ns.Path(), namespace, stdin)); err != nil {
			t.Fatalf("ADD in %s: %v", namespace, err)
		}
		if err := p.Check(cmdArgs(ns.Path(), namespace, stdin)); err != nil {
			t.Fatalf("CHECK in %s: %v", namespace, err)
		}
	}
	if asked["plain"] != 0 || asked["fresh"] != 2 {
		t.Errorf("the agent was asked %v; want never for plain (the view says not enrolled), twice for fresh (not in the view)", asked)
	}
	// DEL still tells a running agent: the pod may have been enrolled when it was added.
	if err := p.Del(cmdArgs(ns.Path(), "plain", stdin)); err != nil {
		t.Fatal(err)
	}
	if n := len(agent.Dels()); n != 1 {
		t.Errorf("the agent got %d DELs of a pod the view says is not enrolled, want 1", n)
	}
}

// TestUnusableViewFailsClosed: a view the plugin cannot use (missing, not JSON, oversized, of
// another version, not a regular file) is today's behaviour: every pod is decided by the agent,
// and with the agent down ADD fails naming the socket and why the view was not used.
func TestUnusableViewFailsClosed(t *testing.T) {
	ns := netnstest.New(t)
	for _, tc := range []struct {
		name  string
		write func(path string) error
		says  string
	}{
		{"missing", func(string) error { return nil }, "no such file"},
		{"corrupt", func(path string) error {
			return os.WriteFile(path, []byte(`{"version":1,"enrolled":["mesh"],"notEn`), 0o644)
		}, "JSON"},
		{"oversized", func(path string) error {
			return os.WriteFile(path, []byte(`{"version":1,"notEnrolled":["plain"],"x":"`+strings.Repeat("x", 5<<20)+`"}`), 0o644)
		}, "more than"},
		{"unknown version", func(path string) error {
			return os.WriteFile(path, []byte(`{"version":2,"enrolled":[],"notEnrolled":["plain"]}`), 0o644)
		}, "version 2"},
		{"no version", func(path string) error { return os.WriteFile(path, []byte(`{"notEnrolled":["plain"]}`), 0o644) }, "version 0"},
		{"a directory", func(path string) error { return os.Mkdir(path, 0o755) }, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "none.sock")
			view := viewPath(missing)
			if err := tc.write(view); err != nil {
				t.Fatal(err)
			}
			err := (&Plugin{Stdout: &bytes.Buffer{}}).Add(cmdArgs(ns.Path(), "plain", conf(missing, ns.Path(), "")))
			wantRefused(t, "ADD", err, missing, view, tc.says)
			if err := capture.Absent(ns.Path()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDelNeverWaitsOnAHungAgent: DEL of a pod the view says is not enrolled tells the agent
// within a short bound, not the configured timeout: pod deletion does not wait on an agent
// that accepts and never answers.
func TestDelNeverWaitsOnAHungAgent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "hung.sock")
	ln, err := enroll.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	writeView(t, viewPath(sock))
	gone := filepath.Join(dir, "netns-gone")
	start := time.Now()
	if err := (&Plugin{}).Del(cmdArgs(gone, "plain", conf(sock, gone, `,"timeout":"30s"`))); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("DEL of a pod not enrolled took %s with a hung agent", d)
	}
}
