package kubeproxyguard

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// elementOwner names the Service an element of service-ips or
// no-endpoint-services belongs to, given kube-proxy's verdict and comment
// (a cut element's are kept in its comment, cutMark): by the chain the
// verdict jumps to (service-ips: "goto service-<hash>-ns/name/…"), or by
// kube-proxy's comment (no-endpoint-services: the verdict is only "goto
// reject-chain" or "drop", so the comment "ns/name:port" is what names the
// Service port).
func elementOwner(mapName string, v verdict, comment string) (types.NamespacedName, bool) {
	if v.Chain != "" {
		if n, ok := parseChainName(v.Chain); ok {
			return n.Service, true
		}
	}
	if mapName == noEndpointServicesMap && comment != "" {
		if svc, ok := parseComment(comment); ok {
			return svc, true
		}
	}
	return types.NamespacedName{}, false
}

// describe prints an element as nft does, prefixed by its map:
// "service-ips: 10.96.100.100 . tcp . 80 : goto service-…".
func describe(mapName string, key []byte, v verdict, comment string) string {
	desc := mapName + ": " + formatKey(key)
	if comment != "" {
		desc += fmt.Sprintf(" comment %q", comment)
	}
	return desc + " : " + v.String()
}

// internalVerdict reports whether a service-ips element's verdict jumps to
// its Service's internal traffic chain (service- or local-), as kube-proxy's
// ClusterIP entries do; its external-IP and load-balancer entries jump to
// the external- (or firewall-) chain.
func internalVerdict(v verdict) bool {
	n, ok := parseChainName(v.Chain)
	return ok && (n.Prefix == "service-" || n.Prefix == "local-")
}

type verdict struct {
	Code  int32
	Chain string
}

func (v verdict) String() string {
	switch v.Code {
	case -4: // NFT_GOTO
		return "goto " + v.Chain
	case -3: // NFT_JUMP
		return "jump " + v.Chain
	case 0:
		return "drop"
	case 1:
		return "accept"
	case -1:
		return "continue"
	case -5:
		return "return"
	}
	return fmt.Sprintf("verdict(%d)", v.Code)
}

// decodeVerdict reads a verdict-map value. google/nftables v0.3.0 returns it
// as the raw nested NFTA_DATA_VERDICT attributes (code, chain).
func decodeVerdict(b []byte) verdict {
	var v verdict
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return verdict{Code: verdictUnknown}
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			v.Code = int32(ad.Uint32())
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = ad.String()
		}
	}
	if ad.Err() != nil {
		return verdict{Code: verdictUnknown}
	}
	return v
}

// formatKey prints the keys of kube-proxy's maps as nft does:
// "ipv4_addr . inet_proto . inet_service" (3 fields, each padded to 4 bytes)
// or "inet_proto . inet_service".
func formatKey(k []byte) string {
	if mk, ok := parseMapKey(k); ok {
		return mk.String()
	}
	if len(k) == 8 {
		return fmt.Sprintf("%s . %d", protoName(k[0]), binary.BigEndian.Uint16(k[4:6]))
	}
	return fmt.Sprintf("%x", k)
}
