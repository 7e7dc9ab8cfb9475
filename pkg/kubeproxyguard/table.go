package kubeproxyguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// TableName is kube-proxy's table (family ip). The guard touches no other.
const TableName = "kube-proxy"

// The verdict maps whose elements belong to one Service port each. The
// cluster-ips set is deliberately absent: its element keeps the
// cluster-ips-check REJECT for an un-intercepted connection to the VIP.
var elementMaps = []string{"service-ips", "no-endpoint-services", "firewall-ips", "service-nodeports", "no-endpoint-nodeports"}

// Object kinds in Status.
const (
	KindElement = "element"
	KindChain   = "chain"
	KindSet     = "set"
)

// element is one verdict-map element that belongs to a Service.
type element struct {
	Map  *nftables.Set
	Elem nftables.SetElement
	Desc string // "service-ips: 10.96.100.100 . tcp . 80 : goto service-…"
}

type chain struct {
	Name  string
	Rules int
}

// objects is what the kube-proxy table holds for one Service.
type objects struct {
	Elements []element
	Chains   []chain
	Sets     []string
}

// needsCut reports whether the Service is still (or again) on kube-proxy's
// packet path: an element, a rule or an affinity set left.
func (o *objects) needsCut() bool {
	if len(o.Elements) > 0 || len(o.Sets) > 0 {
		return true
	}
	for _, c := range o.Chains {
		if c.Rules > 0 {
			return true
		}
	}
	return false
}

// cutOps is the number of operations cutting the Service takes.
func (o *objects) cutOps() int {
	n := len(o.Elements) + len(o.Sets)
	for _, c := range o.Chains {
		if c.Rules > 0 {
			n++
		}
	}
	return n
}

func (o *objects) empty() bool {
	return len(o.Elements) == 0 && len(o.Chains) == 0 && len(o.Sets) == 0
}

// names lists the objects for status and logs.
func (o *objects) names() []ObjectRef {
	var r []ObjectRef
	for _, e := range o.Elements {
		r = append(r, ObjectRef{Kind: KindElement, Name: e.Desc})
	}
	for _, c := range o.Chains {
		r = append(r, ObjectRef{Kind: KindChain, Name: c.Name})
	}
	for _, s := range o.Sets {
		r = append(r, ObjectRef{Kind: KindSet, Name: s})
	}
	return r
}

// table is a read-only view of kube-proxy's table, grouped by Service.
type table struct {
	t        *nftables.Table
	services map[types.NamespacedName]*objects
}

var errNoTable = errors.New("table ip " + TableName + " not found")

// readTable reads what the table holds for the Services in want (all
// Services when want is nil). It dumps the rules only of the chains of
// wanted Services.
func readTable(c *nftables.Conn, want map[types.NamespacedName]bool) (*table, error) {
	t, err := c.ListTableOfFamily(TableName, nftables.TableFamilyIPv4)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, errNoTable
		}
		return nil, fmt.Errorf("get table ip %s: %w", TableName, err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return nil, fmt.Errorf("list sets of table ip %s: %w", TableName, err)
	}
	tb := &table{t: t, services: map[types.NamespacedName]*objects{}}
	get := func(n types.NamespacedName) *objects {
		if want != nil && !want[n] {
			return nil
		}
		o := tb.services[n]
		if o == nil {
			o = &objects{}
			tb.services[n] = o
		}
		return o
	}

	for _, s := range sets {
		if n, ok := parseSetName(s.Name); ok {
			if o := get(n.Service); o != nil {
				o.Sets = append(o.Sets, s.Name)
			}
			continue
		}
		if !slices.Contains(elementMaps, s.Name) {
			continue
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("list elements of map %s: %w", s.Name, err)
		}
		for _, e := range elems {
			svc, desc, ok := elementOwner(s.Name, e)
			if !ok {
				continue
			}
			if o := get(svc); o != nil {
				o.Elements = append(o.Elements, element{Map: s, Elem: e, Desc: desc})
			}
		}
	}

	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != TableName {
			continue
		}
		n, ok := parseChainName(ch.Name)
		if !ok {
			continue
		}
		o := get(n.Service)
		if o == nil {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // deleted since the chain dump
			}
			return nil, fmt.Errorf("list rules of chain %s: %w", ch.Name, err)
		}
		o.Chains = append(o.Chains, chain{Name: ch.Name, Rules: len(rules)})
	}
	return tb, nil
}

// elementOwner names the Service an element of one of elementMaps belongs
// to: by the chain its verdict jumps to (service-ips, firewall-ips,
// service-nodeports: "goto service-<hash>-ns/name/…"), or by kube-proxy's
// comment (no-endpoint-*: the verdict is only "goto reject-chain" or "drop",
// so the comment "ns/name:port" is what names the Service port).
func elementOwner(mapName string, e nftables.SetElement) (types.NamespacedName, string, bool) {
	verdict := decodeVerdict(e.Val)
	desc := mapName + ": " + formatKey(e.Key)
	if e.Comment != "" {
		desc += fmt.Sprintf(" comment %q", e.Comment)
	}
	desc += " : " + verdict.String()
	if verdict.Chain != "" {
		if n, ok := parseChainName(verdict.Chain); ok {
			return n.Service, desc, true
		}
	}
	if strings.HasPrefix(mapName, "no-endpoint-") && e.Comment != "" {
		if svc, ok := parseComment(e.Comment); ok {
			return svc, desc, true
		}
	}
	return types.NamespacedName{}, "", false
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
		return verdict{Code: -100}
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
		return verdict{Code: -100}
	}
	return v
}

// formatKey prints the keys of kube-proxy's maps as nft does:
// "ipv4_addr . inet_proto . inet_service" (3 fields, each padded to 4 bytes)
// or "inet_proto . inet_service".
func formatKey(k []byte) string {
	proto := func(b byte) string {
		switch b {
		case unix.IPPROTO_TCP:
			return "tcp"
		case unix.IPPROTO_UDP:
			return "udp"
		case unix.IPPROTO_SCTP:
			return "sctp"
		}
		return fmt.Sprint(b)
	}
	switch len(k) {
	case 12:
		ip := netip.AddrFrom4([4]byte(k[0:4]))
		return fmt.Sprintf("%s . %s . %d", ip, proto(k[4]), binary.BigEndian.Uint16(k[8:10]))
	case 8:
		return fmt.Sprintf("%s . %d", proto(k[0]), binary.BigEndian.Uint16(k[4:6]))
	}
	return fmt.Sprintf("%x", k)
}
