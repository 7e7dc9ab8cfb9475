package kindconfig

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterModeChoice runs `cluster.sh mode` against a fake docker: online when the pull
// succeeds, offline (with docker's words) when it fails, and an error, not offline, when the
// pull is only slow.
func TestClusterModeChoice(t *testing.T) {
	for _, c := range []struct {
		name, pull  string // the fake `docker pull`'s body
		timeout     string // PULL_TIMEOUT: long where the pull must finish (a loaded machine starts sh slowly)
		want        string // stdout
		wantErr     bool
		wantMessage string // in stderr
	}{
		{"pulled", "exit 0", "60", "online", false, "pulled"},
		{"registry error", `echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2; exit 1`,
			"60", "offline", false, "no such host"},
		{"slow pull", "sleep 30", "1", "", true, "slow pull, not a failed one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := t.TempDir()
			fake := "#!/bin/sh\ncase $1 in\nimage) exit 1 ;;\npull) " + c.pull + " ;;\nesac\n"
			if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "cluster.sh", "mode")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KIND=kind", "CLUSTER=x", "CONFIG=x",
				"KUBECONFIG_OUT=x", "NODE_IMAGE_ONLINE=kindest/node:test", "NODE_IMAGE_OFFLINE=svclb/kind-node:test",
				"PULL_TIMEOUT="+c.timeout, "KIND_NODE_MODE=")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v (stderr %q)", err, c.wantErr, stderr.String())
			}
			if got := strings.TrimSpace(string(out)); got != c.want {
				t.Errorf("mode = %q, want %q (stderr %q)", got, c.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.wantMessage) {
				t.Errorf("stderr %q does not say %q", stderr.String(), c.wantMessage)
			}
		})
	}
}
