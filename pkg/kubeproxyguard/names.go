package kubeproxyguard

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The name prefixes kube-proxy (nftables mode) gives a Service port's own
// chains; see servicePortChainNameBase and servicePortEndpointChainNameBase
// in k8s.io/kubernetes/pkg/proxy/nftables. Every such name contains a "/",
// which no stock kube-proxy object has: that is how kube-proxy itself tells
// them apart (isServiceChainName). The guard reads these names only to tell
// which Service a service-ips element's verdict belongs to; it never
// touches the chains.
var chainPrefixes = []string{"service-", "local-", "external-", "firewall-", "endpoint-"}

// objectName is a kube-proxy Service-port object name taken apart:
// <prefix><HASH8>-<ns>/<name>/<proto>/<portName>[__<endpointIP>/<endpointPort>]
type objectName struct {
	Prefix   string // "service-", "local-", ...
	Service  types.NamespacedName
	Protocol string // tcp, udp, sctp
	PortName string // may be empty (unnamed port)
	Endpoint string // "IP/port" for endpoint- chains
}

// parseName parses a chain name written by kube-proxy for a Service port.
// ok is false for anything else (stock chains, other tools' objects), so
// the guard can never match them.
func parseName(name string, prefixes ...string) (objectName, bool) {
	var n objectName
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			n.Prefix = p
			break
		}
	}
	if n.Prefix == "" || !strings.Contains(name, "/") {
		return n, false
	}
	rest := name[len(n.Prefix):]
	// 8 base32 characters of sha256, then "-".
	if len(rest) < 10 || rest[8] != '-' || !isBase32(rest[:8]) {
		return n, false
	}
	rest = rest[9:]
	svcPart, epPart, hasEP := strings.Cut(rest, "__")
	parts := strings.Split(svcPart, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return n, false
	}
	n.Service = types.NamespacedName{Namespace: parts[0], Name: parts[1]}
	n.Protocol, n.PortName = parts[2], parts[3]
	if hasEP != (n.Prefix == "endpoint-") {
		return n, false
	}
	n.Endpoint = epPart
	return n, true
}

func isBase32(s string) bool {
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// parseChainName parses the name of a Service port's chain (service-,
// local-, external-, firewall-, endpoint-).
func parseChainName(name string) (objectName, bool) { return parseName(name, chainPrefixes...) }

// parseComment parses the comment kube-proxy puts on no-endpoint-services
// elements: the ServicePortName, "<ns>/<name>:<portName>".
func parseComment(c string) (types.NamespacedName, bool) {
	nsName, _, ok := strings.Cut(c, ":")
	if !ok {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}
