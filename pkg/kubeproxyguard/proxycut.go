package kubeproxyguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// The proxy cut (Options.Cut contract.GuardCutProxy) is the guard's own table, not an edit of
// kube-proxy's:
//
//	table ip svclb-guard {
//		set proxy-cut-vips {
//			type ipv4_addr . inet_service
//			elements = { 10.96.100.100 . 80, … }
//		}
//		chain proxy-cut {
//			type filter hook output priority -120; policy accept;
//			meta mark 0x0000ae7e meta l4proto tcp ct state new ip daddr . tcp dport @proxy-cut-vips counter reject with tcp reset comment "…"
//		}
//	}
//
// The node proxy dials from the node's network namespace, so its upstream SYN crosses the
// output hook there, where kube-proxy's nat-output chain (priority -100, dstnat) would DNAT
// a ClusterIP to an endpoint. The guard's chain runs before it: at -120 the packet still has
// the ClusterIP as destination, and conntrack (-200) has already classified it, so "ct state
// new" leaves connections that were established before the cut alone, as kube-proxy's own
// cluster-ips-check REJECT does. -120 is also before kube-proxy's filter-output-pre-dnat
// (-110, its load-balancer source ranges) and after mangle (-150), where nothing of svclb
// or kube-proxy changes the mark. The reset reaches the proxy at once (ECONNREFUSED), as
// the REJECT of an all cut does a client. Only packets with the mark the passthrough
// cluster's sockets set (contract.ProxyUpstreamMark, exactly) are refused: everyone else's
// traffic to the same ClusterIPs, and the proxy's to any other destination, goes on to
// kube-proxy untouched.
const (
	proxyCutChain = "proxy-cut"
	// proxyCutPriority: between conntrack (-200) and kube-proxy's output chains (-110, -100).
	proxyCutPriority nftables.ChainPriority = -120
	// proxyCutRuleComment is on the chain's one rule; a table whose rule says anything else is
	// not the one this guard writes, and is replaced.
	proxyCutRuleComment = "svclb-guard: reset the node proxy's new connections to cut ClusterIP ports"
	// maxSetElems bounds the elements of one netlink message: a transaction may carry
	// several.
	maxSetElems = 512
)

// vipPort is an element of the proxy cut's set: a ClusterIP and a TCP port.
type vipPort struct {
	IP   netip.Addr
	Port uint16
}

// key is the element as the kernel keys "ipv4_addr . inet_service": each field padded to 4
// bytes.
func (v vipPort) key() []byte {
	k := make([]byte, 8)
	a := v.IP.As4()
	copy(k, a[:])
	binary.BigEndian.PutUint16(k[4:], v.Port)
	return k
}

// String is the element as nft prints it: "10.96.100.100 . 80".
func (v vipPort) String() string { return v.IP.String() + " . " + strconv.Itoa(int(v.Port)) }

func parseVIPPort(k []byte) (vipPort, bool) {
	if len(k) != 8 {
		return vipPort{}, false
	}
	return vipPort{IP: netip.AddrFrom4([4]byte(k[:4])), Port: binary.BigEndian.Uint16(k[4:6])}, true
}

func cmpVIPPort(a, b vipPort) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

// proxyTable is what a pass read of the guard's table.
type proxyTable struct {
	present bool
	// sound: chain, set and rule are the ones the guard writes; elements can be changed in
	// place. Otherwise the table is written anew.
	sound  bool
	set    *nftables.Set
	elems  map[vipPort]bool
	resets uint64 // the rule's counter: new connections refused
}

var guardTable = &nftables.Table{Family: nftables.TableFamilyIPv4, Name: contract.GuardTable}

// readProxyTable reads table ip svclb-guard.
func readProxyTable(c *nftables.Conn) (*proxyTable, error) {
	pt := &proxyTable{elems: map[vipPort]bool{}}
	t, err := c.ListTableOfFamily(contract.GuardTable, nftables.TableFamilyIPv4)
	if errors.Is(err, unix.ENOENT) {
		return pt, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get table ip %s: %w", contract.GuardTable, err)
	}
	pt.present = true
	ch, err := c.ListChain(t, proxyCutChain)
	if err != nil || ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookOutput ||
		ch.Priority == nil || *ch.Priority != proxyCutPriority || ch.Type != nftables.ChainTypeFilter {
		return pt, nil //nolint:nilerr // a missing or other chain: written anew
	}
	set, err := c.GetSetByName(t, contract.GuardProxyCutSet)
	if err != nil || !set.Concatenation || set.KeyType.Bytes != 8 {
		return pt, nil //nolint:nilerr // as above
	}
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return nil, fmt.Errorf("list rules of chain %s: %w", proxyCutChain, err)
	}
	if len(rules) != 1 {
		return pt, nil
	}
	if comment, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment); comment != proxyCutRuleComment {
		return pt, nil
	}
	for _, e := range rules[0].Exprs {
		if ctr, ok := e.(*expr.Counter); ok {
			pt.resets = ctr.Packets
		}
	}
	elems, err := c.GetSetElements(set)
	if err != nil {
		return nil, fmt.Errorf("list elements of set %s: %w", contract.GuardProxyCutSet, err)
	}
	for _, e := range elems {
		if v, ok := parseVIPPort(e.Key); ok {
			pt.elems[v] = true
		}
	}
	pt.sound, pt.set = true, set
	return pt, nil
}

// proxyCutWant is what the proxy cut of a pass should refuse: per chosen Service, the
// ClusterIP . port of each ClusterIP entry of a port the meshed path takes over, as
// kube-proxy wrote it (on its path) or as an all cut left it (put back in the same pass). tb
// is nil when kube-proxy has no table: nothing to refuse.
func proxyCutWant(tb *table, want map[types.NamespacedName]bool) map[types.NamespacedName][]vipPort {
	out := map[types.NamespacedName][]vipPort{}
	if tb == nil {
		return out
	}
	for svc := range want {
		o := tb.services[svc]
		if o == nil {
			continue
		}
		var vps []vipPort
		for _, e := range slices.Concat(o.Elements, o.Cut) {
			vps = append(vps, vipPort{IP: e.Dest.IP, Port: e.Dest.Port})
		}
		slices.SortFunc(vps, cmpVIPPort)
		out[svc] = slices.Compact(vps)
	}
	return out
}

// syncProxyCut makes the guard's table refuse exactly the pass's proxyCutWant: elements
// added and removed in one transaction, or, when the table is missing or not the guard's
// shape, the whole table replaced in one.
func (g *Guard) syncProxyCut(p *pass) {
	p.proxyWant = proxyCutWant(p.tb, p.want)
	pt, err := readProxyTable(g.conn)
	if err != nil {
		g.metrics.errors.WithLabelValues("read").Inc()
		p.proxyErr = err
		return
	}
	want := map[vipPort]bool{}
	for _, vps := range p.proxyWant {
		for _, v := range vps {
			want[v] = true
		}
	}
	p.proxyResets, p.proxyHave = pt.resets, pt.elems
	var add, del []vipPort
	for v := range want {
		if !pt.elems[v] {
			add = append(add, v)
		}
	}
	for v := range pt.elems {
		if !want[v] {
			del = append(del, v)
		}
	}
	slices.SortFunc(add, cmpVIPPort)
	slices.SortFunc(del, cmpVIPPort)
	p.proxyAdded = map[vipPort]bool{}
	for _, v := range add {
		p.proxyAdded[v] = true
	}
	switch {
	case !pt.sound:
		if pt.present {
			g.log.Warn("table ip "+contract.GuardTable+" is not the guard's proxy cut; writing it anew", "chain", proxyCutChain, "set", contract.GuardProxyCutSet)
		}
		all := slices.SortedFunc(func(yield func(vipPort) bool) {
			for v := range want {
				if !yield(v) {
					return
				}
			}
		}, cmpVIPPort)
		err = g.writeProxyTable(all)
		p.proxyAdded = want
		p.proxyResets = 0
	case len(add)+len(del) > 0:
		err = g.updateProxySet(pt.set, add, del)
	}
	if err != nil {
		g.metrics.errors.WithLabelValues("cut").Inc()
		p.proxyErr = err
		p.proxyAdded = nil
	}
}

// writeProxyTable replaces the guard's table in one transaction (add, delete, add: the add
// makes the delete safe on a missing table), so no connection meets a half-written one.
func (g *Guard) writeProxyTable(elems []vipPort) error {
	c := g.conn
	c.AddTable(guardTable)
	c.DelTable(guardTable)
	t := c.AddTable(guardTable)
	ch := c.AddChain(&nftables.Chain{
		Name: proxyCutChain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRef(proxyCutPriority),
	})
	set := &nftables.Set{
		Table: t, Name: contract.GuardProxyCutSet, Concatenation: true,
		KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService),
	}
	first := elems[:min(len(elems), maxSetElems)]
	if err := c.AddSet(set, setElements(first)); err != nil {
		return fmt.Errorf("add set %s: %w", set.Name, err)
	}
	for rest := elems[len(first):]; len(rest) > 0; rest = rest[min(len(rest), maxSetElems):] {
		if err := c.SetAddElements(set, setElements(rest[:min(len(rest), maxSetElems)])); err != nil {
			return fmt.Errorf("add elements to set %s: %w", set.Name, err)
		}
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: proxyCutRule(set),
		UserData: userdata.AppendString(nil, userdata.TypeComment, proxyCutRuleComment)})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write table ip %s (%d elements): %w", contract.GuardTable, len(elems), err)
	}
	return nil
}

// updateProxySet adds and deletes elements of the guard's set in one transaction.
func (g *Guard) updateProxySet(set *nftables.Set, add, del []vipPort) error {
	for ; len(del) > 0; del = del[min(len(del), maxSetElems):] {
		if err := g.conn.SetDeleteElements(set, setElements(del[:min(len(del), maxSetElems)])); err != nil {
			return fmt.Errorf("delete elements of set %s: %w", set.Name, err)
		}
	}
	for ; len(add) > 0; add = add[min(len(add), maxSetElems):] {
		if err := g.conn.SetAddElements(set, setElements(add[:min(len(add), maxSetElems)])); err != nil {
			return fmt.Errorf("add elements to set %s: %w", set.Name, err)
		}
	}
	if err := g.conn.Flush(); err != nil {
		return fmt.Errorf("update set %s: %w", set.Name, err)
	}
	return nil
}

func setElements(vps []vipPort) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(vps))
	for _, v := range vps {
		out = append(out, nftables.SetElement{Key: v.key()})
	}
	return out
}

// proxyCutRule: meta mark == ProxyUpstreamMark, meta l4proto tcp, ct state new,
// ip daddr . tcp dport in set, counter, reject with tcp reset.
func proxyCutRule(set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(contract.ProxyUpstreamMark)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		// "ip daddr . tcp dport": the two fields in registers 1 and 9 (NFT_REG32_01), as nft
		// lays out a concatenation.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		&expr.Counter{},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}
}

// removeProxyCut deletes the guard's table, left by a guard in proxy mode, once this guard
// cuts for everyone (an all cut whose chosen set is the node's truth).
func (g *Guard) removeProxyCut(p *pass) {
	if !p.authoritative {
		return
	}
	if _, err := g.conn.ListTableOfFamily(contract.GuardTable, nftables.TableFamilyIPv4); errors.Is(err, unix.ENOENT) {
		return
	} else if err != nil {
		p.proxyErr = fmt.Errorf("get table ip %s: %w", contract.GuardTable, err)
		return
	}
	g.conn.DelTable(guardTable)
	if err := g.conn.Flush(); err != nil {
		g.metrics.errors.WithLabelValues("restore").Inc()
		p.proxyErr = fmt.Errorf("delete table ip %s: %w", contract.GuardTable, err)
		return
	}
	g.log.Info("deleted the proxy cut's table: this guard cuts kube-proxy's entries for everyone", "table", "ip "+contract.GuardTable)
}
