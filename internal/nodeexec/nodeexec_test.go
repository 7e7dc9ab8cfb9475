package nodeexec

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseExec(t *testing.T) {
	for _, tc := range []struct {
		args []string
		root string
		cmd  []string
		err  string
	}{
		{args: []string{"--", "nft", "list", "ruleset"}, root: "/host", cmd: []string{"nft", "list", "ruleset"}},
		{args: []string{"--root", "/r", "--", "ip", "-j", "addr"}, root: "/r", cmd: []string{"ip", "-j", "addr"}},
		// A command's own "--" and flags are its own.
		{args: []string{"--", "bash", "-c", "echo -- x"}, root: "/host", cmd: []string{"bash", "-c", "echo -- x"}},
		{args: []string{"nft", "list"}, err: `want "--"`},
		{args: []string{"--"}, err: "no command"},
		{args: []string{"--root=", "--", "true"}, err: "--root is empty"},
		{args: []string{"x", "--", "true"}, err: "unexpected"},
		{args: []string{"--bogus", "--", "true"}, err: "bogus"},
	} {
		root, cmd, err := ParseExec(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || root != tc.root || !slices.Equal(cmd, tc.cmd) {
			t.Errorf("%q: %q %q %v, want %q %q", tc.args, root, cmd, err, tc.root, tc.cmd)
		}
	}
}

func TestMainUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"bogus"}, {"serve", "x"}, {"exec", "true"}} {
		var errb bytes.Buffer
		if code := Main(context.Background(), args, &errb); code != 2 || !strings.Contains(errb.String(), "usage:") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the usage", args, code, errb.String())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := Main(ctx, []string{"serve"}, &bytes.Buffer{}); code != 0 {
		t.Errorf("serve after SIGTERM: exit %d", code)
	}
}

// childEnv makes the test binary the svclb-nodeexec process in TestExecChroot's child.
const childEnv = "SVCLB_NODEEXEC_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

// TestExecChroot runs exec for real (root only): into a root whose /bin holds a copy of the
// test binary itself (statically linked), named "probe", which the child finds on Path there
// and runs; the probe prints the directory it sees as /, so the chroot is proved, not assumed.
func TestExecChroot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ldd", self).CombinedOutput(); err == nil && !strings.Contains(string(out), "not a dynamic") {
		t.Skipf("the test binary is dynamically linked (%s): build with CGO_ENABLED=0", strings.TrimSpace(string(out)))
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "marker"), []byte("the node's root\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/probe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	// probe is the test binary again: TestProbe reads /marker and prints PATH.
	cmd := exec.Command(self, "exec", "--root", root, "--", "probe", "-test.run=^TestProbe$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("exec: %v: %s", err, out)
	}
	for _, want := range []string{"marker: the node's root", "PATH=" + Path} {
		if !strings.Contains(string(out), want) {
			t.Errorf("probe said %q, want %q", out, want)
		}
	}
	// A command the root does not hold: 127, as a shell.
	cmd = exec.Command(self, "exec", "--root", root, "--", "nft", "list", "ruleset")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 127 || !strings.Contains(string(out), "nft") {
		t.Errorf("missing command: %v %s, want exit 127 naming nft", err, out)
	}
}

// TestProbe is what TestExecChroot's chrooted child runs; it does nothing in a normal run.
func TestProbe(t *testing.T) {
	if os.Getenv("PATH") != Path {
		t.Skip("only as TestExecChroot's probe")
	}
	b, err := os.ReadFile("/marker")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print("marker: " + string(b) + "PATH=" + os.Getenv("PATH") + "\n")
}
