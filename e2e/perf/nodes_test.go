package perf

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/perf/internal/nodestat"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/metrics"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// The processes nodestat reads on a node: their command names.
const (
	procAgent     = "svclb-agent"
	procNodeProxy = "svclb-nodeproxy"
	procKubeProxy = "kube-proxy"
)

// nodeReadWithin bounds one read on a node (docker exec, or pods/exec into the node-access
// DaemonSet): under heavy load an exec has hung, its command long done, until killed.
const nodeReadWithin = 30 * time.Second

func nodeExec(ctx context.Context, node string, cmd ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeReadWithin)
	defer cancel()
	return suite.cluster.NodeExec(ctx, node, cmd...)
}

func nodeGet(ctx context.Context, node string, port int, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeReadWithin)
	defer cancel()
	return suite.cluster.NodeGet(ctx, node, port, path)
}

func readProc(ctx context.Context, node, name string) (nodestat.Sample, error) {
	return nodestat.Read(ctx, nodeExec, node, name)
}

// kubeProxyServices counts the elements of kube-proxy's service-ips map on
// node that lead to a Service of namespace ns (its chains are named
// service-<hash>-<ns>/<name>/<protocol>/<port>): one per Service port. A
// guarded Service's element cut by the guard (": continue", its verdict
// kept only in the comment as "|goto service-…") is not counted: what
// kube-proxy routes, as when the guard deleted it.
func kubeProxyServices(ctx context.Context, node, ns string) (int, error) {
	out, err := nodeExec(ctx, node, "sh", "-c",
		fmt.Sprintf("nft list map ip kube-proxy service-ips | grep -o ': goto service-[A-Z0-9]*-%s/' | wc -l", ns))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// kubeProxyMetrics reads kube-proxy's metrics on node, bounded as every
// node read.
func kubeProxyMetrics(ctx context.Context, node string) (metrics.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeReadWithin)
	defer cancel()
	return guard.KubeProxyMetrics(ctx, suite.cluster, node)
}

// kubeProxyFullSyncs is how many full syncs kube-proxy on node has made
// since it started (its first sync is one).
func kubeProxyFullSyncs(ctx context.Context, node string) (float64, error) {
	m, err := kubeProxyMetrics(ctx, node)
	if err != nil {
		return 0, err
	}
	// A histogram: its _count sample belongs to the family, not a family of its own.
	return m.Histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", map[string]string{"ip_family": "IPv4"}).Count, nil
}

// kubeProxySyncFailures is kube-proxy's count of failed nftables syncs on
// node.
func kubeProxySyncFailures(ctx context.Context, node string) (float64, error) {
	m, err := kubeProxyMetrics(ctx, node)
	if err != nil {
		return 0, err
	}
	return m.Sum("kubeproxy_sync_proxy_rules_nftables_sync_failures_total", map[string]string{"ip_family": "IPv4"}), nil
}

// proxyClusters are the node proxy's active and warming clusters
// (cluster_manager gauges, as Envoy names them).
func proxyClusters(ctx context.Context, node string) (active, warming int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, nodeReadWithin)
	defer cancel()
	st, err := proxy.Stats(ctx, suite.cluster, node)
	if err != nil {
		return 0, 0, err
	}
	return st["cluster_manager.active_clusters"], st["cluster_manager.warming_clusters"], nil
}

// configDumpBytes is the size of the node proxy's config dump with its
// endpoints: the snapshot the node holds.
func configDumpBytes(ctx context.Context, node string) (int, error) {
	b, err := nodeGet(ctx, node, contract.ProxyAdminPort, "/config_dump?include_eds")
	if err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return 0, fmt.Errorf("config dump on %s: not JSON: %.100q", node, b)
	}
	return len(b), nil
}
