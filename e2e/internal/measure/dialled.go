package measure

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/fixtures/workload"
)

// Dialled is one target a leg dials, declared for the evidence the suite
// gathers around each run (e2e/doc.go, "Evidence"): per client node the
// node proxy's counters for it, the agent's refusals of it, and, for a cut
// Service, kube-proxy's ClusterIP entries of it on every node before and
// after.
type Dialled struct {
	// To is the address dialled, host:port, spelled as the leg dials it
	// (workload.Addr): results are matched to it by echo.Result To.
	To string
	// Namespace and Service name the Service that owns To; both empty for an
	// address no Service holds (refuse-no-service).
	Namespace, Service string
	// Reason, when set, is the refusal green expects for the attempts the
	// proxy closes (agent.ReasonNoEndpoints, …): the agent must count each
	// one with it, on the client's node, and its refusal log must hold a
	// record naming the Service and To.
	Reason string
	// RestartsKubeProxy says the leg restarts kube-proxy itself, so a
	// restore of the Service during the run is its subject, not a fault
	// (reach-after-resync). The Service must still be cut before and after.
	RestartsKubeProxy bool
	// OutsideRange says To lies outside the Service range (passthrough): in
	// both runs the capture's default chain cap_passthrough carries it,
	// whatever the Phase flags.
	OutsideRange bool
	// KubeProxys says To is a port of a Service svclb leaves to kube-proxy
	// (default/kubernetes, pkg/contract APIServerService): the capture
	// listener sends its VIP to cap_passthrough_svc whatever the Phase
	// flags, so both runs need tcp.cap_passthrough_svc.downstream_cx_total
	// to rise by the node's attempts, and no svc: cluster of it is expected.
	KubeProxys bool
	// UpstreamFailures says the attempts the proxy closes are failed
	// connections to an endpoint (outlier: a Ready pod with the port
	// closed), not refusals: the agent must count none of them.
	UpstreamFailures bool
	// CreatedInRun says the leg creates the Service while it dials To
	// (new-service): the attempts made before the Service exists are
	// refused no-service, and the agent classifies a refusal when the
	// proxy's access log reaches it (agent/internal/xdsserver Classify, with
	// its index at that moment), so one made just before the creation can be
	// counted not-programmed under the Service. Its refusals are checked
	// together with the no-service ones: exactly the node's proxy-closed
	// attempts to To.
	CreatedInRun bool
}

// ServicePort declares port of svc as dialled.
func ServicePort(svc *corev1.Service, port int) Dialled {
	return Dialled{To: workload.Addr(svc, port), Namespace: svc.Namespace, Service: svc.Name}
}

// Refused returns d expecting green to refuse it with reason.
func (d Dialled) Refused(reason string) Dialled {
	d.Reason = reason
	return d
}

// String is "ns/name (to)", or the address alone.
func (d Dialled) String() string {
	switch {
	case d.OutsideRange:
		return d.To + " (outside the Service range)"
	case d.KubeProxys:
		return fmt.Sprintf("%s/%s (%s) kube-proxy's", d.Namespace, d.Service, d.To)
	case d.Service == "":
		return d.To + " (no Service)"
	}
	s := fmt.Sprintf("%s/%s (%s)", d.Namespace, d.Service, d.To)
	if d.Reason != "" {
		s += " refused " + d.Reason
	}
	return s
}

// port is the port of To (0 when To does not parse).
func (d Dialled) port() uint16 {
	_, p, err := net.SplitHostPort(d.To)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

// serviceKey groups targets by the Service the agent names in its refusal
// series ("" for no Service).
func (d Dialled) serviceKey() string {
	if d.Service == "" {
		return ""
	}
	return d.Namespace + "/" + d.Service
}
