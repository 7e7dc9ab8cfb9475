package uninstall

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Nodes runs a command on a node, as root in its host namespaces.
type Nodes interface {
	Exec(ctx context.Context, node string, cmd ...string) (string, error)
}

// Docker reaches a kind node through its container, named as the node (docker exec).
type Docker struct{}

// Exec runs cmd in node's container and returns its output.
func (Docker) Exec(ctx context.Context, node string, cmd ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", node}, cmd...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker exec %s %s: %w: %s (svclb-e2e reads a node's nftables in its kind container)",
			node, strings.Join(cmd, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
