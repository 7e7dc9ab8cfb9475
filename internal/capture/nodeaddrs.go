package capture

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// NodeAddrsSet is the named set (type ipv4_addr) of the capture table holding Config.NodeAddrs:
// the output chain returns TCP to them unmarked.
const NodeAddrsSet = "node_addrs"

// CheckNodeAddr says whether a may be one of Config.NodeAddrs: an IPv4 address (not an
// IPv4-mapped IPv6 one) outside contract.NodeLocalRanges, which are never a node's own
// address and which the capture listener refuses by range.
func CheckNodeAddr(a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("capture: node address %s is not IPv4", a)
	}
	for _, p := range contract.NodeLocalRanges() {
		if p.Contains(a) {
			return fmt.Errorf("capture: node address %s is in the node-local range %s", a, p)
		}
	}
	return nil
}

// ParseNodeAddrs reads a comma-separated list of addresses as the downward API prints
// status.hostIPs ("172.18.0.3" or "172.18.0.3,fc00:f853:ccd:e793::3"). IPv6 entries are
// skipped (the capture is IPv4 only); every IPv4 entry must pass CheckNodeAddr, and an entry
// that is no address at all (spaces included), an empty entry or a repeated one is an error.
// The empty string is no address.
func ParseNodeAddrs(s string) ([]netip.Addr, error) {
	if s == "" {
		return nil, nil
	}
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("capture: node address %q in %q: %w", f, s, err)
		}
		if a.Is6() && !a.Is4In6() {
			continue
		}
		if err := CheckNodeAddr(a); err != nil {
			return nil, err
		}
		for _, b := range out {
			if a == b {
				return nil, fmt.Errorf("capture: node address %s listed twice in %q", a, s)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// checkNodeAddrs validates Config.NodeAddrs.
func checkNodeAddrs(addrs []netip.Addr) error {
	for i, a := range addrs {
		if err := CheckNodeAddr(a); err != nil {
			return err
		}
		for _, b := range addrs[:i] {
			if a == b {
				return fmt.Errorf("capture: node address %s given twice", a)
			}
		}
	}
	return nil
}
