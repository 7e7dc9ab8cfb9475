package kubeproxyguard

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// mapKey is a key of service-ips or no-endpoint-services taken apart:
// kube-proxy matches "ip daddr . meta l4proto . th dport" against keys typed
// "ipv4_addr . inet_proto . inet_service", each field padded to 4 bytes
// (12 bytes: address, protocol number, port in network order).
type mapKey struct {
	IP    netip.Addr
	Proto uint8 // IANA protocol number: unix.IPPROTO_TCP, _UDP, _SCTP
	Port  uint16
}

// parseMapKey reads a 12-byte key; ok is false for any other layout.
func parseMapKey(k []byte) (mapKey, bool) {
	if len(k) != 12 {
		return mapKey{}, false
	}
	return mapKey{IP: netip.AddrFrom4([4]byte(k[0:4])), Proto: k[4], Port: binary.BigEndian.Uint16(k[8:10])}, true
}

// String prints the key as nft does: "10.96.100.100 . tcp . 80".
func (k mapKey) String() string { return fmt.Sprintf("%s . %s . %d", k.IP, protoName(k.Proto), k.Port) }

// port is the Service port the key matches, as /status names it: "tcp/80".
func (k mapKey) port() string { return protoName(k.Proto) + "/" + strconv.Itoa(int(k.Port)) }

// leftToKubeProxy says why the meshed path leaves the key's port to
// kube-proxy, so the guard must not cut it; "" when the meshed path takes it
// over (contract.MeshServes) and the guard cuts it.
func (k mapKey) leftToKubeProxy() string {
	switch {
	case contract.MeshServes(k.Proto, k.Port):
		return ""
	case k.Proto != contract.MeshProtocol:
		return protoName(k.Proto) + ": not served by the agent"
	case k.Port == contract.DNSPort:
		return k.port() + ": DNS passes through the capture"
	}
	return k.port() + ": not taken over by the meshed path"
}

// protoName is nft's name of an inet_proto value.
func protoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_SCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// sortedPorts returns the distinct ports of keys (one per protocol and
// port, whatever the address), by protocol name, then port number.
func sortedPorts(keys []mapKey) []mapKey {
	r := slices.Clone(keys)
	slices.SortFunc(r, func(a, b mapKey) int {
		return cmp.Or(cmp.Compare(protoName(a.Proto), protoName(b.Proto)), cmp.Compare(a.Port, b.Port))
	})
	return slices.CompactFunc(r, func(a, b mapKey) bool { return a.Proto == b.Proto && a.Port == b.Port })
}
