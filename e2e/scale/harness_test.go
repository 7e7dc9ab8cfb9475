package scale

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/internal/testing/testenv"
	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

// harnessNode is the one Node the harness registers: kube-proxy's and the agent's.
const harnessNode = "node-a"

// harness is what the scale tests share: an envtest apiserver with one Node, a network
// namespace for kube-proxy's nftables with the apiserver forwarded into it, the agent and
// node proxy binaries built, and a kubeconfig for the children.
type harness struct {
	kube       kubernetes.Interface
	ns         *netnstest.NS
	dir        string
	kubeProxy  string // the kube-proxy binary
	kubeconfig string
}

func newHarness(t *testing.T) *harness {
	h := &harness{kubeProxy: testenv.Binary(t, "kube-proxy")}
	for _, b := range []string{"nft", "nsenter"} {
		prereq.Command(t, b)
	}
	h.ns = netnstest.New(t) // kube-proxy programs this namespace's nftables, never the host's
	h.dir = t.TempDir()
	build(t, h.dir, "./cmd/svclb-agent", "./cmd/svclb-nodeproxy")

	cfg := testenv.Start(t, testenv.Options{})
	cfg.QPS, cfg.Burst = 1000, 2000 // client-go's default 5 QPS would take an hour
	h.kube = kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	n, err := h.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: harnessNode},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy waits for its Node to have an address.
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.10"}}
	if _, err := h.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	h.kubeconfig = filepath.Join(h.dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, h.kubeconfig); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	if err := h.ns.Do(func() (err error) { l, err = net.Listen("tcp", u.Host); return err }); err != nil {
		t.Fatalf("apiserver forwarder in %s: %v", h.ns.Name(), err)
	}
	t.Cleanup(testenv.Forward(l, u.Host))
	return h
}

// startKubeProxy runs kube-proxy (nftables) in the harness's namespace, as
// pkg/kubeproxyguard's test runs it (its ports are the namespace's own).
func (h *harness) startKubeProxy(t *testing.T) *process {
	return startProcess(t, h.dir, "kube-proxy", h.ns.Command(h.kubeProxy, "--kubeconfig="+h.kubeconfig, "--proxy-mode=nftables",
		"--hostname-override="+harnessNode, "--cluster-cidr=10.244.0.0/16",
		"--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249",
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0", "--v=1"))
}

// startAgent runs the agent (by default proactive CDS; with no captured pod, only Service
// clusters), with extra flags if any (--service-range, --cds), and returns it with its HTTP
// address and xDS socket. Its --netns-dir is netnsDir.
func (h *harness) startAgent(t *testing.T, extra ...string) (p *process, httpAddr, sock string) {
	httpAddr, sock = freeAddr(t), filepath.Join(h.dir, "run", "xds.sock")
	args := append([]string{"--node-name=" + harnessNode, "--kubeconfig=" + h.kubeconfig, "--xds-socket=" + sock, "--http=" + httpAddr,
		"--netns-dir=" + h.netnsDir(t), "--log-level=warn"}, extra...)
	p = startProcess(t, h.dir, "svclb-agent", exec.Command(filepath.Join(h.dir, "svclb-agent"), args...))
	return p, httpAddr, sock
}

// netnsDir is the agent's directory of pod network namespace files (empty unless a test links
// a captured pod's namespace there), created on first use.
func (h *harness) netnsDir(t *testing.T) string {
	d := filepath.Join(h.dir, "netns")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// startNodeProxy runs the built-in node proxy on the agent's socket, with extra flags if any
// (TestGrowth's --pprof), and returns it with its admin address.
func (h *harness) startNodeProxy(t *testing.T, sock string, extra ...string) (p *process, admin string) {
	admin = freeAddr(t)
	args := append([]string{"--xds-socket=" + sock, "--node-id=svclb-node~" + harnessNode, "--admin=" + admin}, extra...)
	return startProcess(t, h.dir, "svclb-nodeproxy", exec.Command(filepath.Join(h.dir, "svclb-nodeproxy"), args...)), admin
}
