package capture

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Names shared with the agent and the node proxy (docs/architecture.md).
const (
	// Port is the node proxy's transparent capture listener in the pod netns.
	Port uint16 = contract.CapturePort
	// Addr is the address that listener binds and TPROXY delivers to (loopback).
	Addr = contract.CaptureAddr
	// Mark is put on the pod's outbound TCP so the policy route diverts it to lo.
	Mark uint32 = contract.CaptureMark
	// ProxyMark is the node proxy's own upstream mark; such traffic is never captured.
	ProxyMark uint32 = contract.ProxyUpstreamMark
	// RouteTable holds the `local 0.0.0.0/0 dev lo` route for marked packets.
	RouteTable = 100
	// RulePriority is the priority of the fwmark policy rule (before main at 32766).
	RulePriority = 100
	// TableName is the nftables table (family ip) holding the capture chains.
	TableName = "svclb_capture"
)

// Config says where and how to capture. The zero value is not useful; start from
// DefaultConfig.
type Config struct {
	// NetNSPath is the network namespace file to program; empty means the
	// calling thread's namespace (the init container's, i.e. the pod's).
	NetNSPath string
	Port      uint16
	Mark      uint32
	ProxyMark uint32
	// RouteTable and RulePriority place the policy route.
	RouteTable   int
	RulePriority int
	// NodeAddrs are the node's own IPv4 addresses (CheckNodeAddr; no repeats). TCP to them is
	// not captured: it leaves the pod from the pod's address, as an unmeshed pod's does, so
	// kube-proxy serves the node's NodePorts and the node's hostPorts and hostNetwork pods see
	// the pod. Captured, it would reach the listener, whose cap_refused closes it (the
	// passthrough would dial it as the node). The agent's enroll reply gives the CNI plugin the
	// list its listeners refuse; the init container gets the downward API's status.hostIPs.
	NodeAddrs []netip.Addr
}

// DefaultConfig is the project's capture: Port, Mark, ProxyMark, RouteTable.
func DefaultConfig() Config {
	return Config{Port: Port, Mark: Mark, ProxyMark: ProxyMark, RouteTable: RouteTable, RulePriority: RulePriority}
}

func (c Config) validate() error {
	switch {
	case c.Port == 0:
		return errors.New("capture: port must be set")
	case c.Mark == 0:
		return errors.New("capture: mark must be non-zero")
	case c.Mark == c.ProxyMark:
		return fmt.Errorf("capture: mark %#x must differ from the proxy mark", c.Mark)
	case c.RouteTable <= 0 || c.RouteTable == unix.RT_TABLE_MAIN || c.RouteTable == unix.RT_TABLE_LOCAL || c.RouteTable == unix.RT_TABLE_DEFAULT:
		return fmt.Errorf("capture: route table %d is reserved or invalid", c.RouteTable)
	case c.RulePriority <= 0 || c.RulePriority >= 32766:
		return fmt.Errorf("capture: rule priority %d must be in (0, 32766)", c.RulePriority)
	}
	return checkNodeAddrs(c.NodeAddrs)
}

// uncaptured are destinations never diverted: loopback, link-local (cloud
// metadata, node-local DNS caches), multicast. The node's own addresses are not
// captured either (Config.NodeAddrs, the set NodeAddrsSet).
var uncaptured = []*net.IPNet{
	{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)},
	{IP: net.IPv4(169, 254, 0, 0).To4(), Mask: net.CIDRMask(16, 32)},
	{IP: net.IPv4(224, 0, 0, 0).To4(), Mask: net.CIDRMask(4, 32)},
}

// Install programs capture in the namespace of cfg. It is idempotent: the
// nftables table is replaced atomically and the rule and route are added only
// when missing, so re-running an init container leaves one copy of everything.
func Install(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	h, err := openHandles(cfg.NetNSPath)
	if err != nil {
		return err
	}
	defer h.close()
	nh := h.link
	lo, err := nh.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("capture: find lo: %w", err)
	}
	// A pod's lo is up already; a fresh netns's is not, and the divert needs it.
	if err := nh.LinkSetUp(lo); err != nil {
		return fmt.Errorf("capture: set lo up: %w", err)
	}
	if err := ensureRoute(nh, cfg, lo.Attrs().Index); err != nil {
		return err
	}
	if err := ensureRule(nh, cfg); err != nil {
		return err
	}
	if err := writeTable(h.nft, cfg, lo.Attrs().Index); err != nil {
		return err
	}
	return nil
}

// Uninstall removes what Install added; missing pieces are not an error.
func Uninstall(cfg Config) error {
	h, err := openHandles(cfg.NetNSPath)
	if err != nil {
		return err
	}
	defer h.close()
	c, nh := h.nft, h.link
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	c.AddTable(t) // so the delete cannot fail on a missing table
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("capture: delete table %s: %w", TableName, err)
	}
	rules, err := findRules(nh, cfg)
	if err != nil {
		return err
	}
	for i := range rules {
		if err := nh.RuleDel(&rules[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("capture: delete rule: %w", err)
		}
	}
	lo, err := nh.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("capture: find lo: %w", err)
	}
	if err := nh.RouteDel(localRoute(cfg, lo.Attrs().Index)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("capture: delete route: %w", err)
	}
	return nil
}

// handles are the netlink and nftables sockets of the namespace to program.
type handles struct {
	link *netlink.Handle
	nft  *nftables.Conn
	ns   netns.NsHandle
}

// openHandles opens sockets in the namespace at path. With no path it opens
// plain sockets in the caller's own namespace and never setns(2)s: setns needs
// CAP_SYS_ADMIN even into the namespace one is in, and the init container of a
// meshed pod has NET_ADMIN only.
func openHandles(path string) (*handles, error) {
	if path == "" {
		nh, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("capture: netlink handle: %w", err)
		}
		c, err := nftables.New()
		if err != nil {
			nh.Close()
			return nil, fmt.Errorf("capture: nftables: %w", err)
		}
		return &handles{link: nh, nft: c, ns: netns.None()}, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("capture: open netns %s: %w", path, err)
	}
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("capture: netlink handle in %s: %w", path, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		nh.Close()
		ns.Close()
		return nil, fmt.Errorf("capture: nftables in %s: %w", path, err)
	}
	return &handles{link: nh, nft: c, ns: ns}, nil
}

func (h *handles) close() {
	h.link.Close()
	_ = h.nft.CloseLasting()
	if h.ns.IsOpen() {
		h.ns.Close()
	}
}

func localRoute(cfg Config, loIndex int) *netlink.Route {
	return &netlink.Route{
		Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		LinkIndex: loIndex,
		Table:     cfg.RouteTable,
		Type:      unix.RTN_LOCAL,
		Scope:     netlink.SCOPE_HOST,
		Protocol:  unix.RTPROT_STATIC,
	}
}

func ensureRoute(nh *netlink.Handle, cfg Config, loIndex int) error {
	// RouteReplace is idempotent by itself.
	if err := nh.RouteReplace(localRoute(cfg, loIndex)); err != nil {
		return fmt.Errorf("capture: route local 0.0.0.0/0 dev lo table %d: %w", cfg.RouteTable, err)
	}
	return nil
}

func findRules(nh *netlink.Handle, cfg Config) ([]netlink.Rule, error) {
	all, err := nh.RuleList(unix.AF_INET)
	if err != nil {
		return nil, fmt.Errorf("capture: list rules: %w", err)
	}
	var out []netlink.Rule
	for _, r := range all {
		if r.Mark == cfg.Mark && r.Table == cfg.RouteTable {
			out = append(out, r)
		}
	}
	return out, nil
}

func ensureRule(nh *netlink.Handle, cfg Config) error {
	have, err := findRules(nh, cfg)
	if err != nil {
		return err
	}
	if len(have) > 0 {
		return nil
	}
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Mark = cfg.Mark
	mask := uint32(0xffffffff)
	r.Mask = &mask
	r.Table = cfg.RouteTable
	r.Priority = cfg.RulePriority
	if err := nh.RuleAdd(r); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("capture: rule fwmark %#x lookup %d: %w", cfg.Mark, cfg.RouteTable, err)
	}
	return nil
}

// writeTable replaces the capture table in one transaction: add (no-op when it
// exists), delete, re-create. A reader never sees a half-built table.
func writeTable(c *nftables.Conn, cfg Config, loIndex int) error {
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)

	nodeAddrs := &nftables.Set{Table: t, Name: NodeAddrsSet, KeyType: nftables.TypeIPAddr}
	elems := make([]nftables.SetElement, 0, len(cfg.NodeAddrs))
	for _, a := range cfg.NodeAddrs {
		b := a.As4()
		elems = append(elems, nftables.SetElement{Key: b[:]})
	}
	if err := c.AddSet(nodeAddrs, elems); err != nil {
		return fmt.Errorf("capture: set %s: %w", NodeAddrsSet, err)
	}
	out := c.AddChain(&nftables.Chain{
		Name: "output", Table: t, Type: nftables.ChainTypeRoute,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityMangle,
	})
	for _, e := range outputRules(cfg, nodeAddrs) {
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: e})
	}
	pre := c.AddChain(&nftables.Chain{
		Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: preroutingRule(cfg, loIndex)})
	in := c.AddChain(&nftables.Chain{
		Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: inputRule(cfg, loIndex)})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("capture: write table ip %s: %w", TableName, err)
	}
	return nil
}

// outputRules mark the pod's own new outbound TCP; everything else returns
// unmarked. Order matters only for cost: the cheapest, most common exits first.
func outputRules(cfg Config, nodeAddrs *nftables.Set) [][]expr.Any {
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	rules := [][]expr.Any{
		// The proxy's own upstream traffic (SO_MARK) must never loop back into it.
		append(matchMark(cfg.ProxyMark), ret),
		// Replies of flows tracked in the other direction (the pod serving, or the
		// capture listener answering the pod) are not new outbound connections.
		{&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1 /* IP_CT_DIR_REPLY */}}, ret},
	}
	for _, n := range uncaptured {
		rules = append(rules, []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(n.Mask), Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(n.IP.To4())},
			ret,
		})
	}
	rules = append(rules,
		// The node's own addresses leave the pod directly (Config.NodeAddrs).
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: nodeAddrs.Name, SetID: nodeAddrs.ID},
			ret,
		},
		// DNS over TCP goes straight to the resolver.
		append(matchTCP(), &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(contract.DNSPort)}, ret),
		append(matchTCP(), setMark(cfg.Mark)...),
	)
	return rules
}

// preroutingRule hands marked packets arriving on lo to the transparent
// listener at Addr:Port. tproxy first looks for an established socket, then the
// listener; without a listener it falls through and the packet meets a RST.
func preroutingRule(cfg Config, loIndex int) []expr.Any {
	e := matchIIF(expr.CmpOpEq, loIndex)
	e = append(e, matchMark(cfg.Mark)...)
	e = append(e, matchTCP()...)
	e = append(e,
		&expr.Immediate{Register: 1, Data: net.ParseIP(Addr).To4()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(cfg.Port)},
		&expr.TProxy{Family: byte(nftables.TableFamilyIPv4), TableFamily: byte(nftables.TableFamilyIPv4), RegAddr: 1, RegPort: 2},
	)
	// Keep the mark so the fwmark rule routes the packet to the local socket.
	e = append(e, setMark(cfg.Mark)...)
	return append(e, &expr.Verdict{Kind: expr.VerdictAccept})
}

// inputRule resets TCP to the capture port that did not come through the divert
// (which arrives on lo): a connection from another host, or the proxy's own
// upstream, to <podIP>:Port would otherwise be restored as that same address,
// passed through, and dialled from the node into this listener again, without
// end. The listener binds loopback, so nothing outside should find it anyway;
// this keeps the pod closed whatever address a proxy binds.
func inputRule(cfg Config, loIndex int) []expr.Any {
	e := matchIIF(expr.CmpOpNeq, loIndex)
	e = append(e, matchTCP()...)
	return append(e,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(cfg.Port)},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	)
}

func matchIIF(op expr.CmpOp, index int) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: binaryutil.NativeEndian.PutUint32(uint32(index))},
	}
}

func matchMark(m uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(m)},
	}
}

func matchTCP() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
}

func setMark(m uint32) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(m)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}
