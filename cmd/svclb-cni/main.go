// Command svclb-cni is the chained CNI plugin that meshes the pods of enrolled namespaces (see
// internal/cniplugin). Run as `svclb-cni install`, it is the node DaemonSet's installer of
// itself (see internal/cniinstall): one image, one binary to copy.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/aether-mesh/svclb/internal/cniinstall"
	"github.com/aether-mesh/svclb/internal/cniplugin"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func main() {
	// The runtime always sets CNI_COMMAND; "install" is for the DaemonSet only.
	if os.Getenv("CNI_COMMAND") == "" && len(os.Args) > 1 && os.Args[1] == "install" {
		os.Exit(install(os.Args[2:]))
	}
	// The runtime reads stdout as the result: logs go to stderr, which it records.
	p := &cniplugin.Plugin{Stdout: os.Stdout, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	skel.PluginMainFuncs(skel.CNIFuncs{Add: p.Add, Check: p.Check, Del: p.Del},
		version.PluginSupports(cniplugin.SupportedVersions...), "svclb-cni: captures the pods of enrolled namespaces")
}

func install(args []string) int {
	fs := flag.NewFlagSet("svclb-cni install", flag.ContinueOnError)
	in := &cniinstall.Installer{}
	var socket, timeout, exclude string
	fs.StringVar(&in.ConfDir, "conf-dir", "/host"+contract.CNIConfDir, "the host's CNI conf dir, as mounted")
	fs.StringVar(&in.BinDir, "bin-dir", "/host"+contract.CNIBinDir, "the host's CNI bin dir, as mounted")
	fs.StringVar(&socket, "agent-socket", contract.EnrollSocket, "the agent's enrollment socket, as the host sees it")
	fs.StringVar(&timeout, "timeout", "", "bound on an ADD's wait for the agent and the listener (default: the plugin's)")
	fs.StringVar(&exclude, "exclude-namespaces", "kube-system", "comma-separated namespaces the plugin passes through without asking the agent")
	fs.DurationVar(&in.Interval, "interval", 2*time.Second, "how often to check that the binary and the conflist entry are still there")
	ds := fs.String("daemonset", contract.Namespace+"/"+contract.NodeDaemonSet,
		"namespace/name of the DaemonSet running the installer: when stopped, the plugin stays while it still runs the installer")
	container := fs.String("container", contract.CNIInstallContainer, "the installer's container name in that DaemonSet")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "svclb-cni install: %v\n", err)
		return 1
	}
	in.Source = self
	var ns []string
	for _, n := range strings.Split(exclude, ",") {
		if n = strings.TrimSpace(n); n != "" {
			ns = append(ns, n)
		}
	}
	in.Entry = cniinstall.Entry(socket, timeout, ns)
	in.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if ns, name, ok := strings.Cut(*ds, "/"); ok && *ds != "" {
		if w, err := cniinstall.InClusterWanted(ns, name, *container); err != nil {
			in.Log.Warn("not in a cluster: the plugin is removed whenever the installer stops", "error", err)
		} else {
			in.Wanted = w.Wanted
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := in.Run(ctx, func() { in.Log.Info("svclb-cni installed", "conf-dir", in.ConfDir, "bin-dir", in.BinDir) }); err != nil {
		in.Log.Error("uninstall failed", "error", err)
		return 1
	}
	return 0
}
