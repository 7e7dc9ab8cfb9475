package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/e2e/internal/kube"
)

// setupFuncs is the suite's setup, composed from fixtures. Each step prints
// progress and records its wall time; a failing step dumps diagnostics.
func setupFuncs() []env.Func {
	return []env.Func{
		step("setup: connect", connect),
		step("setup: record environment", recordEnv),
		step("setup: deploy guard", deployGuard),
		step("setup: deploy node DaemonSet", deployNode),
		step("setup: legs namespace", legsNamespace),
		step("setup: meshed clients", meshedClients),
	}
}

func finishFuncs() []env.Func {
	return []env.Func{step("finish: cleanup", cleanup)}
}

// step wraps an env func with progress, timing and, on failure, a dump.
func step(name string, f env.Func) env.Func {
	return func(ctx context.Context, c *envconf.Config) (context.Context, error) {
		progress("%s", name)
		t0 := time.Now()
		ctx, err := f(ctx, c)
		d := time.Since(t0)
		if suite != nil {
			_ = suite.evidence.AddPhase(name, d)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
			progress("%s FAILED after %s: %v", name, d.Round(100*time.Millisecond), err)
			if suite != nil {
				_ = suite.evidence.WriteFailure(err.Error())
				dumpDiagnostics(ctx, cfg.artifacts+"/failures/"+sanitize(name))
			}
			return ctx, err
		}
		progress("%s done in %s", name, d.Round(100*time.Millisecond))
		return ctx, nil
	}
}

func connect(ctx context.Context, c *envconf.Config) (context.Context, error) {
	if _, err := os.Stat(cfg.kubeconfig); err != nil {
		return ctx, fmt.Errorf("kubeconfig %s: %w (run `make cluster` first)", cfg.kubeconfig, err)
	}
	kc, err := c.NewClient()
	if err != nil {
		return ctx, fmt.Errorf("client for %s: %w", cfg.kubeconfig, err)
	}
	cl, err := kube.New(cfg.cluster, kc)
	if err != nil {
		return ctx, err
	}
	suite.cluster = cl
	return ctx, nil
}

var modeRe = regexp.MustCompile(`(?m)^mode:\s*"?([a-z]*)"?`)

func recordEnv(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	cs := suite.cluster.CS
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return ctx, fmt.Errorf("list nodes: %w", err)
	}
	e := &evidence.Env{
		Proxy:        cfg.proxy,
		ProxyChoice:  os.Getenv("SVCLB_PROXY_CHOICE"),
		KindVersion:  getenv("SVCLB_KIND_VERSION", "unknown"),
		EnvoyVersion: "n/a (built-in proxy)",
		Started:      cfg.start,
	}
	if cfg.proxy == "envoy" {
		e.EnvoyVersion = getenv("SVCLB_ENVOY_VERSION", "unknown")
	}
	for _, n := range nodes.Items {
		node := evidence.Node{Name: n.Name, Zone: n.Labels[corev1.LabelTopologyZone]}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				node.IP = a.Address
			}
		}
		e.Nodes = append(e.Nodes, node)
	}
	suite.nodes = e.Nodes
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		e.KubernetesVersion = v.GitVersion
	} else {
		return ctx, fmt.Errorf("server version: %w", err)
	}
	if cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{}); err == nil {
		if m := modeRe.FindStringSubmatch(cm.Data["config.conf"]); m != nil {
			e.KubeProxyMode = m[1]
		}
	}
	if e.KubeProxyMode != "nftables" {
		return ctx, fmt.Errorf("kube-proxy mode is %q: the legs need nftables mode (kindconfig sets it)", e.KubeProxyMode)
	}
	progress("cluster %s: Kubernetes %s, %d nodes, kube-proxy %s, proxy %s", cfg.cluster, e.KubernetesVersion, len(e.Nodes), e.KubeProxyMode, e.Proxy)
	return ctx, suite.evidence.WriteEnv(e)
}

func legsNamespace(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	nss := suite.cluster.CS.CoreV1().Namespaces()
	// A namespace left by an earlier run (KEEP_CLUSTER=1, or an interrupted
	// run) is deleted first: legs start from nothing.
	if err := nss.Delete(ctx, suite.legsNS, metav1.DeleteOptions{}); err == nil || !apierrors.IsNotFound(err) {
		progress("setup: deleting leftover namespace %s", suite.legsNS)
		err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := nss.Get(ctx, suite.legsNS, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			return ctx, fmt.Errorf("leftover namespace %s not gone: %w", suite.legsNS, err)
		}
	}
	_, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: suite.legsNS}}, metav1.CreateOptions{})
	if err != nil {
		return ctx, fmt.Errorf("create namespace %s: %w", suite.legsNS, err)
	}
	return ctx, nil
}

func cleanup(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if suite.cluster == nil {
		return ctx, nil
	}
	if cfg.keep {
		progress("cleanup: KEEP_CLUSTER=1: leaving namespace %s and the infrastructure in place", suite.legsNS)
		return ctx, nil
	}
	// Leave the flags on, as a user of the cluster would expect after a run.
	err := suite.cluster.CS.CoreV1().Namespaces().Delete(ctx, suite.legsNS, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return ctx, fmt.Errorf("delete namespace %s: %w", suite.legsNS, err)
	}
	return ctx, nil
}

// meshedClients starts one meshed client per node; most legs dial from all.
func meshedClients(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	for _, n := range suite.nodes {
		if err := create(ctx, meshedClient("client-"+n.Name, n.Name)); err != nil {
			return ctx, err
		}
	}
	pods, err := waitPodsReady(ctx, "role=client", len(suite.nodes), 3*time.Minute)
	if err != nil {
		return ctx, err
	}
	suite.clients = pods
	return ctx, nil
}
