package cli

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/e2e-framework/klient"

	"github.com/aether-mesh/svclb/e2e/internal/uninstall"
	"github.com/aether-mesh/svclb/fixtures/cluster"
)

// nodeAccessUsage is the --node-access flag's text (run, uninstall, doctor).
const nodeAccessUsage = "how a node's root is reached: docker (docker exec: kind's node containers) or daemonset (exec into\n" +
	"a privileged DaemonSet that chroots into the node); default: docker when every node is a running container of the\n" +
	"local Docker engine, else daemonset (logged with why)"

// uninstaller is an Uninstaller of target t with the suite's node access: want
// (--node-access), else chosen as the suite chooses (cluster.ChooseNodeAccess), logged with
// why. In daemonset mode it deploys the node-access DaemonSet itself, with the suite's
// image and pull policy (images.Current: --registry's).
func uninstaller(ctx context.Context, t Target, name, want string, log io.Writer) (*uninstall.Uninstaller, error) {
	mode, err := cluster.ParseNodeAccess(want)
	if err != nil {
		return nil, err
	}
	cfg, err := t.RESTConfig()
	if err != nil {
		return nil, err
	}
	kc, err := klient.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c, err := cluster.New(ctx, name, kc)
	if err != nil {
		return nil, err
	}
	mode, why := c.ChooseAccess(ctx, mode, nil)
	fmt.Fprintf(log, "node access: %s: %s\n", mode, why)
	return &uninstall.Uninstaller{Cluster: c, Log: log}, nil
}
