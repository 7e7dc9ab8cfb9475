package doctor

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/envoy"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Level is how a finding weighs.
type Level string

// The levels.
const (
	OK   Level = "ok"
	Warn Level = "warn"
	Fail Level = "FAIL"
)

// Line is one finding.
type Line struct {
	Level Level
	Topic string
	Text  string
}

func (l Line) String() string { return fmt.Sprintf("%-4s  %-11s %s", l.Level, l.Topic, l.Text) }

// Options are what the run will ask of the cluster.
type Options struct {
	// Proxy is the node proxy the run takes (manifests.ProxyBuiltin or ProxyEnvoy).
	Proxy string
	// EnvoyImage: envoy.Image when empty.
	EnvoyImage string
	// NodeAccess is the asked node access ("": chosen, cluster.ChooseNodeAccess).
	NodeAccess cluster.NodeAccess
	// Probe tells a node container of the local Docker engine; nil: cluster.LocalDocker.
	Probe cluster.DockerProbe
	// Source is where the run takes the project's images from (--registry): kind-loaded ones
	// must be on every node; a registry's are pulled at deploy and not checked here.
	Source images.Source
}

// Images are the images a run with o deploys: the project's (never pulled; none when they
// come from a registry) and, with Envoy, Envoy's (pulled where missing).
func (o Options) Images() (local, pulled []string) {
	im := manifests.DefaultImages()
	if o.Source.Registry() == "" {
		local = []string{im.Agent, im.Capture, im.Echo, guard.Defaults().Image}
	}
	switch o.Proxy {
	case manifests.ProxyEnvoy:
		img := o.EnvoyImage
		if img == "" {
			img = envoy.Image
		}
		pulled = []string{img}
	default:
		if o.Source.Registry() == "" {
			local = append(local, im.NodeProxy)
		}
	}
	return local, pulled
}

// Run checks the cluster cs reaches.
func Run(ctx context.Context, cs kubernetes.Interface, o Options) []Line {
	var out []Line
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return []Line{{Fail, "apiserver", fmt.Sprintf("not reachable: %v", err)}}
	}
	out = append(out, Line{OK, "apiserver", "Kubernetes " + v.GitVersion})
	out = append(out, kubeProxy(ctx, cs))
	out = append(out, serviceCIDRs(ctx, cs))
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, Line{Fail, "nodes", fmt.Sprintf("list: %v", err)})
	}
	out = append(out, nodeLines(nodes.Items)...)
	access, mode := nodeAccess(ctx, nodes.Items, o)
	out = append(out, access)
	local, pulled := o.Images()
	if mode == cluster.NodeAccessDaemonSet && o.Source.Registry() == "" {
		image, _ := cluster.NodeAccessImage()
		local = append(local, image)
	}
	if r := o.Source.Registry(); r != "" {
		out = append(out, Line{OK, "image", fmt.Sprintf("the project's images are pulled from %s at deploy (%s): not checked here; svclb-e2e images push puts them there",
			r, o.Source.Ref("<name>"))})
	}
	out = append(out, imageLines(nodes.Items, local, pulled)...)
	return out
}

// nodeAccess says which node access the suite (and uninstall) would take on these nodes, and
// why: the same choice, cluster.ChooseNodeAccess.
func nodeAccess(ctx context.Context, nodes []corev1.Node, o Options) (Line, cluster.NodeAccess) {
	probe := o.Probe
	if probe == nil {
		probe = cluster.LocalDocker
	}
	mode, why, _ := cluster.ChooseNodeAccess(ctx, o.NodeAccess, cluster.NodesOf(nodes), probe)
	text := fmt.Sprintf("%s: %s", mode, why)
	if mode == cluster.NodeAccessDaemonSet {
		text += fmt.Sprintf("; the suite deploys %s/%s (privileged, root on every node: docs/security.md)", contract.Namespace, contract.NodeAccessName)
	}
	return Line{OK, "node access", text}, mode
}

// Failed says whether any line is a FAIL.
func Failed(lines []Line) bool {
	return slices.ContainsFunc(lines, func(l Line) bool { return l.Level == Fail })
}

// Print writes the lines and a last one saying whether the suite can run.
func Print(w io.Writer, lines []Line) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if Failed(lines) {
		fmt.Fprintln(w, "the suite cannot run on this cluster: fix the FAIL lines above")
	} else {
		fmt.Fprintln(w, "the suite can run on this cluster")
	}
}

var (
	modeRe      = regexp.MustCompile(`(?m)^mode:\s*"?([a-z]*)"?`)
	proxyModeRe = regexp.MustCompile(`^--proxy-mode=(\S*)$`)
)

// kubeProxy reads kube-proxy's mode: the kubeadm ConfigMap's config.conf, else the
// DaemonSet's --proxy-mode flag. The guard needs nftables.
func kubeProxy(ctx context.Context, cs kubernetes.Interface) Line {
	const topic = "kube-proxy"
	mode, from := "", ""
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	switch {
	case err == nil:
		if m := modeRe.FindStringSubmatch(cm.Data["config.conf"]); m != nil && m[1] != "" {
			mode, from = m[1], "ConfigMap kube-system/kube-proxy"
		}
	case !apierrors.IsNotFound(err):
		return Line{Fail, topic, fmt.Sprintf("read ConfigMap kube-system/kube-proxy: %v", err)}
	}
	ds, dsErr := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if dsErr == nil {
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, a := range slices.Concat(c.Command, c.Args) {
				if m := proxyModeRe.FindStringSubmatch(a); m != nil {
					mode, from = m[1], "DaemonSet kube-system/kube-proxy --proxy-mode"
				}
			}
		}
	}
	switch {
	case mode == "nftables":
		return Line{OK, topic, "mode nftables (" + from + ")"}
	case mode != "":
		return Line{Fail, topic, fmt.Sprintf("mode %q (%s): the guard cuts kube-proxy's nftables entries only; run kube-proxy with mode nftables", mode, from)}
	case err != nil && apierrors.IsNotFound(dsErr):
		return Line{Fail, topic, "no ConfigMap or DaemonSet kube-system/kube-proxy: the suite needs kube-proxy in nftables mode"}
	default:
		return Line{Fail, topic, "mode not set (iptables by default on Linux): the suite needs mode nftables"}
	}
}

// serviceCIDRs lists the ServiceCIDRs.
func serviceCIDRs(ctx context.Context, cs kubernetes.Interface) Line {
	const topic = "ServiceCIDR"
	l, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Line{Warn, topic, fmt.Sprintf("list networking.k8s.io/v1 ServiceCIDRs: %v (the agent then needs its Service range set; range-grows fails)", err)}
	}
	var cidrs []string
	for _, s := range l.Items {
		cidrs = append(cidrs, s.Name+"="+strings.Join(s.Spec.CIDRs, ","))
	}
	if len(cidrs) == 0 {
		return Line{Warn, topic, "none: the agent has no Service range to read"}
	}
	return Line{OK, topic, strings.Join(cidrs, " ")}
}

// nodeLines: how many nodes, Ready, roles, zones.
func nodeLines(nodes []corev1.Node) []Line {
	var out []Line
	var notReady, workers, cps []string
	zones := map[string][]string{}
	var noZone []string
	for _, n := range nodes {
		if !cluster.NodeReady(n) {
			notReady = append(notReady, n.Name)
		}
		if _, cp := n.Labels[cluster.LabelControlPlane]; cp {
			cps = append(cps, n.Name)
		} else {
			workers = append(workers, n.Name)
		}
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
			zones[z] = append(zones[z], n.Name)
		} else {
			noZone = append(noZone, n.Name)
		}
	}
	switch {
	case len(nodes) == 0:
		return []Line{{Fail, "nodes", "none"}}
	case len(notReady) > 0:
		out = append(out, Line{Fail, "nodes", fmt.Sprintf("%d, not Ready: %s", len(nodes), strings.Join(notReady, ", "))})
	default:
		out = append(out, Line{OK, "nodes", fmt.Sprintf("%d, all Ready", len(nodes))})
	}
	roles := fmt.Sprintf("control plane: %s; workers: %s", list(cps), list(workers))
	if len(workers) == 0 {
		out = append(out, Line{Fail, "roles", roles + " (the legs dial from the first worker: a node without " + cluster.LabelControlPlane + ")"})
	} else {
		out = append(out, Line{OK, "roles", roles})
	}
	out = append(out, schedulableLine(nodes))
	var zs []string
	for z, ns := range zones {
		zs = append(zs, z+"="+strings.Join(ns, ","))
	}
	sort.Strings(zs)
	switch {
	case len(zones) < 3:
		out = append(out, Line{Warn, "zones", fmt.Sprintf("%s; without %s on schedulable nodes in three zones the topology leg skips", list(zs), corev1.LabelTopologyZone)})
	case len(noZone) > 0:
		out = append(out, Line{Warn, "zones", fmt.Sprintf("%s; no zone: %s", strings.Join(zs, " "), strings.Join(noZone, ", "))})
	default:
		out = append(out, Line{OK, "zones", strings.Join(zs, " ")})
	}
	return out
}

// schedulableLine: which nodes take the suites' pods. The meshed clients are pinned by
// nodeName, so the suite itself keeps them off a node tainted NoSchedule or NoExecute or
// cordoned (cluster.Node.Schedulable); the node DaemonSets tolerate every taint.
func schedulableLine(nodes []corev1.Node) Line {
	var ok, off []string
	for _, n := range nodes {
		var why []string
		if n.Spec.Unschedulable {
			why = append(why, "cordoned")
		}
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				why = append(why, fmt.Sprintf("%s:%s", t.Key, t.Effect))
			}
		}
		if len(why) == 0 {
			ok = append(ok, n.Name)
		} else {
			off = append(off, fmt.Sprintf("%s (%s)", n.Name, strings.Join(why, ", ")))
		}
	}
	text := fmt.Sprintf("%s; no client pods on: %s", list(ok), list(off))
	if len(ok) == 0 {
		return Line{Fail, "schedulable", text}
	}
	return Line{OK, "schedulable", text}
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// statusImagesCap is the kubelet's default --node-status-max-images: a node's status lists
// its 50 largest images only, so an image absent from a full list may be there all the same.
const statusImagesCap = 50

// imageLines: which nodes lack which image, the project's (local) and the pulled ones (node status lists the images a node holds).
func imageLines(nodes []corev1.Node, local, pulled []string) []Line {
	// missing are the nodes whose status does not list image; unsure those whose list is full.
	missing := func(image string) (missing, unsure []string) {
		want := cluster.NormalizeImage(image)
		for _, n := range nodes {
			has := false
			for _, im := range n.Status.Images {
				for _, name := range im.Names {
					if name == want || cluster.NormalizeImage(name) == want {
						has = true
					}
				}
			}
			switch {
			case has:
			case len(n.Status.Images) >= statusImagesCap:
				unsure = append(unsure, n.Name)
			default:
				missing = append(missing, n.Name)
			}
		}
		return missing, unsure
	}
	var out []Line
	check := func(img string, ifMissing Level, why string) {
		m, u := missing(img)
		switch {
		case len(m) > 0:
			out = append(out, Line{ifMissing, "image", fmt.Sprintf("%s missing on %s: %s", img, strings.Join(m, ", "), why)})
		case len(u) > 0:
			out = append(out, Line{Warn, "image", fmt.Sprintf("%s not in the status of %s, which lists only the %d largest images: not known", img, strings.Join(u, ", "), statusImagesCap)})
		default:
			out = append(out, Line{OK, "image", img + " on every node"})
		}
	}
	for _, img := range local {
		check(img, Fail, "never pulled; build and load it (make images)")
	}
	for _, img := range pulled {
		check(img, Warn, "pulled at deploy, which needs its registry (else --proxy builtin)")
	}
	return out
}
