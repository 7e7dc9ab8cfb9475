package cniplugin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/enroll"
)

// Plugin is the plugin's commands; main wires them to skel.
type Plugin struct {
	Stdout io.Writer // where ADD prints its result
	Log    *slog.Logger
	// Capture is the capture to install; zero: capture.DefaultConfig().
	Capture capture.Config
}

func (p *Plugin) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p *Plugin) capture(netnsPath string) capture.Config {
	c := p.Capture
	if c.Port == 0 {
		c = capture.DefaultConfig()
	}
	c.NetNSPath = netnsPath
	return c
}

// podOf is the pod the runtime sets up; ok is false outside Kubernetes (no K8S_POD_* args).
func podOf(args *skel.CmdArgs) (enroll.Pod, bool, error) {
	a, err := parseArgs(args.Args)
	if err != nil {
		return enroll.Pod{}, false, err
	}
	pod := enroll.Pod{
		Namespace: string(a.K8S_POD_NAMESPACE), Name: string(a.K8S_POD_NAME), UID: string(a.K8S_POD_UID),
		ContainerID: args.ContainerID, Netns: args.Netns,
	}
	return pod, pod.Namespace != "" && pod.Name != "", nil
}

// Add is CNI ADD.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData, true)
	if err != nil {
		return err
	}
	pod, ok, err := podOf(args)
	if err != nil {
		return err
	}
	if !ok || conf.excluded(pod.Namespace) {
		return p.print(conf)
	}
	// The view first: a pod of a namespace the agent has not enrolled starts without it.
	view := readView(p.log(), conf.NamespacesFile, pod.Namespace)
	if view.notEnrolled() {
		p.log().Info("ADD", append([]any{"pod", pod.String(), "enrolled", false}, view.logAttrs()...)...)
		return p.print(conf)
	}
	if args.Netns == "" {
		return types.NewError(types.ErrInvalidNetNS, "svclb-cni: no network namespace (CNI_NETNS)", "")
	}
	prev, err := types100.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "svclb-cni: prevResult", err.Error())
	}
	if ip := podIPv4(prev); ip != nil {
		pod.IP = ip.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), conf.timeout)
	defer cancel()
	c := enroll.Client{Socket: conf.AgentSocket}
	var nodeAddrs []netip.Addr
	enrolled, err := c.Add(ctx, pod, func(addrs []netip.Addr) error {
		// The agent's addresses are the ones its listener refuses: TCP to them leaves the pod
		// directly instead (capture.Config.NodeAddrs).
		nodeAddrs = addrs
		cfg := p.capture(args.Netns)
		cfg.NodeAddrs = addrs
		return capture.Install(cfg)
	})
	if err != nil {
		// TryAgainLater: the kubelet retries the sandbox; the pod must not start uncaptured.
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("svclb-cni: ADD %s", pod), err.Error()+view.detail())
	}
	p.log().Info("ADD", "pod", pod.String(), "enrolled", enrolled, "netns", args.Netns, "ip", pod.IP, "nodeAddrs", nodeAddrs)
	return p.print(conf)
}

// print passes the previous result on, in the configuration's version.
func (p *Plugin) print(conf *NetConf) error {
	r, err := conf.PrevResult.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "svclb-cni: prevResult", err.Error())
	}
	w := p.Stdout
	if w == nil {
		w = os.Stdout
	}
	return r.PrintTo(w)
}

// Check is CNI CHECK: for an enrolled pod, the rules and the listener are there.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData, true)
	if err != nil {
		return err
	}
	pod, ok, err := podOf(args)
	if err != nil || !ok || conf.excluded(pod.Namespace) {
		return err
	}
	view := readView(p.log(), conf.NamespacesFile, pod.Namespace)
	if view.notEnrolled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), conf.timeout)
	defer cancel()
	enrolled, err := enroll.Client{Socket: conf.AgentSocket}.Check(ctx, pod)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("svclb-cni: CHECK %s", pod), err.Error()+view.detail())
	}
	if !enrolled {
		return nil
	}
	if err := capture.Check(p.capture(args.Netns)); err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("svclb-cni: CHECK %s: capture missing in %s", pod, args.Netns), err.Error())
	}
	return nil
}

// Del is CNI DEL. It always succeeds: what it cannot undo (the netns is gone, the agent is
// down) is logged, and the agent drops a pod whose object is deleted on its own.
//
// It removes the rules and tells the agent whatever the namespace view says: the pod may have
// been enrolled when it was added, and a running agent must forget its sandbox. For a namespace
// the view says is not enrolled the agent gets notEnrolledDelTimeout, not the configured
// timeout: its DEL is a map update, and such a pod's deletion must not wait on an agent that
// accepts and never answers.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData, false)
	if err != nil {
		p.log().Warn("DEL with a malformed configuration; cleaning up with the defaults", "error", err)
		conf, _ = parseConf([]byte(`{}`), false)
	}
	pod, ok, err := podOf(args)
	if err != nil || !ok || conf.excluded(pod.Namespace) {
		return nil //nolint:nilerr // DEL never fails
	}
	if args.Netns != "" {
		if _, err := os.Stat(args.Netns); err == nil {
			if err := capture.Uninstall(p.capture(args.Netns)); err != nil {
				p.log().Warn("DEL: removing the capture rules failed", "pod", pod.String(), "netns", args.Netns, "error", err)
			}
		}
	}
	timeout, level := conf.timeout, slog.LevelWarn
	if readView(p.log(), conf.NamespacesFile, pod.Namespace).notEnrolled() {
		timeout, level = min(timeout, notEnrolledDelTimeout), slog.LevelInfo
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := (enroll.Client{Socket: conf.AgentSocket}).Del(ctx, pod); err != nil {
		p.log().Log(context.Background(), level, "DEL: telling the agent failed", "pod", pod.String(), "error", err)
	}
	return nil
}

// notEnrolledDelTimeout bounds DEL's call to the agent for a pod of a namespace the view says is
// not enrolled.
const notEnrolledDelTimeout = 2 * time.Second

// podIPv4 is the pod's IPv4 address in the main plugin's result: one on an interface in the
// sandbox when the result says which, else the first.
func podIPv4(r *types100.Result) net.IP {
	var first net.IP
	for _, ip := range r.IPs {
		v4 := ip.Address.IP.To4()
		if v4 == nil {
			continue
		}
		if first == nil {
			first = v4
		}
		if ip.Interface != nil && *ip.Interface >= 0 && *ip.Interface < len(r.Interfaces) && r.Interfaces[*ip.Interface].Sandbox != "" {
			return v4
		}
	}
	return first
}
