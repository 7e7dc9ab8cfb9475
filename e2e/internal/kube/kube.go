package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient"
)

// Cluster is the kind cluster the legs run against.
type Cluster struct {
	Name   string // kind cluster name; node containers are named after it
	Client klient.Client
	CS     kubernetes.Interface
}

// New wraps a klient.Client.
func New(name string, c klient.Client) (*Cluster, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return &Cluster{Name: name, Client: c, CS: cs}, nil
}

// PodGet fetches path from port of a pod through the apiserver's pod proxy
// (GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path>), so the suite
// needs no route to the node network.
func (c *Cluster) PodGet(ctx context.Context, ns, pod string, port int, path string) ([]byte, error) {
	b, err := c.CS.CoreV1().RESTClient().Get().
		Namespace(ns).Resource("pods").Name(pod + ":" + strconv.Itoa(port)).
		SubResource("proxy").Suffix(strings.TrimPrefix(path, "/")).
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s/%s:%d%s: %w", ns, pod, port, path, err)
	}
	return b, nil
}

// Exec runs cmd in a pod's container and returns its stdout and stderr.
func (c *Cluster) Exec(ctx context.Context, ns, pod, container string, cmd ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := c.Client.Resources().ExecInPod(ctx, ns, pod, container, cmd, &out, &errOut)
	if err != nil {
		return out.String(), errOut.String(), fmt.Errorf("exec %s/%s %q: %w (stderr: %s)", ns, pod, cmd, err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), nil
}

// NodeExec runs a command in a kind node container (docker exec): the only
// way to read the node's nftables without deploying anything.
func (c *Cluster) NodeExec(ctx context.Context, node string, cmd ...string) (string, error) {
	args := append([]string{"exec", node}, cmd...)
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker exec %s %s: %w: %s", node, strings.Join(cmd, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// NodeGet fetches path from 127.0.0.1:port of a kind node: what listens on
// the node's loopback only (kube-proxy's metrics, the node proxy's admin) is
// out of the apiserver proxy's reach. It uses bash's /dev/tcp in the node
// container because the node image has no curl.
func (c *Cluster) NodeGet(ctx context.Context, node string, port int, path string) ([]byte, error) {
	out, err := c.NodeExec(ctx, node, "bash", "-c",
		fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d; printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3; cat <&3`, port, path))
	if err != nil {
		return nil, err
	}
	return httpBody(out, fmt.Sprintf("%s 127.0.0.1:%d%s", node, port, path))
}

// httpBody returns the body of a raw HTTP/1.0 response, or an error naming
// what when it is not a 200.
func httpBody(raw, what string) ([]byte, error) {
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w (got %q)", what, err, trunc(raw, 200))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: body: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", what, resp.Status, trunc(string(b), 200))
	}
	return b, nil
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// KubeProxyTable returns `nft list table ip kube-proxy` of a node.
func (c *Cluster) KubeProxyTable(ctx context.Context, node string) (string, error) {
	return c.NodeExec(ctx, node, "nft", "list", "table", "ip", "kube-proxy")
}
