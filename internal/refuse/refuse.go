package refuse

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// TableName is the table (family ip) in the pod's netns; the Set* names its sets.
const (
	TableName = "svclb_refuse"
	// SetName holds the refused destinations of reason no-endpoints (VIP . port), a counter
	// each.
	SetName = "refused"
	// SetVIPs holds the served Services' VIPs; SetDeclared their declared ports (VIP . port).
	// A SYN to a VIP of SetVIPs on a port SetDeclared lacks is refused (port-not-declared).
	SetVIPs     = "vips"
	SetDeclared = "declared"
	// SetUndeclared is the rule's own record of the port-not-declared refusals: each
	// destination it reset, a counter each, kept UndeclaredIdle after its last SYN and at
	// most UndeclaredMax at once (a pod can dial any port). It counts only: a destination it
	// has no room for is still reset, its refusal not counted.
	SetUndeclared = "undeclared"
	// Priority runs the chain before the capture's output chain (mangle,
	// -150): a refused SYN is never marked for the proxy.
	Priority = -160
)

// UndeclaredIdle and UndeclaredMax bound SetUndeclared. The agent reads the counters every
// contract.RefuseCountEvery, well within UndeclaredIdle, so an element goes only after its
// last count was read.
const (
	UndeclaredIdle = time.Minute
	UndeclaredMax  = 1024
)

// The kernel's 32-bit registers: a concatenation is loaded into consecutive ones.
const (
	reg32x00 = 8 // NFT_REG32_00
	reg32x01 = 9
)

// Sets is what a pod's table refuses: NoEndpoints by destination; every port of VIPs that
// Declared does not hold.
type Sets struct {
	NoEndpoints []netip.AddrPort
	VIPs        []netip.Addr
	Declared    []netip.AddrPort
}

func (s Sets) empty() bool {
	return len(s.NoEndpoints) == 0 && len(s.VIPs) == 0 && len(s.Declared) == 0
}

// Counted are the refusals (SYNs reset) per destination, by reason, since the destination
// entered SetName or SetUndeclared.
type Counted struct {
	NoEndpoints map[netip.AddrPort]uint64
	NotDeclared map[netip.AddrPort]uint64
}

func table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
}

func destSet(t *nftables.Table, name string) *nftables.Set {
	return &nftables.Set{
		Table: t, Name: name,
		KeyType:       nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService),
		Concatenation: true,
	}
}

func refusedSet(t *nftables.Table) *nftables.Set {
	s := destSet(t, SetName)
	s.Counter = true
	return s
}

func vipSet(t *nftables.Table) *nftables.Set {
	return &nftables.Set{Table: t, Name: SetVIPs, KeyType: nftables.TypeIPAddr}
}

func undeclaredSet(t *nftables.Table) *nftables.Set {
	s := destSet(t, SetUndeclared)
	s.Counter, s.Dynamic, s.HasTimeout, s.Timeout, s.Size = true, true, true, UndeclaredIdle, UndeclaredMax
	return s
}

// Install (re)creates the table in the netns c talks to, holding s, in one transaction.
// golden: testdata/table.golden.
func Install(c *nftables.Conn, s Sets) error {
	t := table()
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	refused, vips, declared, undeclared := refusedSet(t), vipSet(t), destSet(t, SetDeclared), undeclaredSet(t)
	for _, x := range []struct {
		set *nftables.Set
		els []nftables.SetElement
	}{{refused, elements(s.NoEndpoints)}, {vips, addrElements(s.VIPs)}, {declared, elements(s.Declared)}, {undeclared, nil}} {
		if err := c.AddSet(x.set, x.els); err != nil {
			return fmt.Errorf("refuse: set %s: %w", x.set.Name, err)
		}
	}
	prio := nftables.ChainPriority(Priority)
	ch := c.AddChain(&nftables.Chain{
		Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: &prio,
	})
	// What the capture leaves to kube-proxy is never refused here: the proxy's own sockets and
	// TCP to port 53 (internal/capture's output chain returns them; the other destinations it
	// returns, loopback, link-local, multicast and the node's addresses, are no VIP).
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(contract.ProxyUpstreamMark)},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(tcp(),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(contract.DNSPort)},
		&expr.Verdict{Kind: expr.VerdictReturn},
	)})
	// no-endpoints: the destination is in the set.
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(append(syn(), loadDest()...),
		&expr.Lookup{SourceRegister: reg32x00, SetName: refused.Name, SetID: refused.ID},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	)})
	// port-not-declared: a served VIP, a port it does not declare. The negated lookup comes
	// first; a SYN that passes it is recorded (its own rule: a full record still resets).
	notDeclared := func(then ...expr.Any) []expr.Any {
		return append(append(append(syn(), loadDest()...),
			&expr.Lookup{SourceRegister: reg32x00, SetName: declared.Name, SetID: declared.ID, Invert: true},
			&expr.Lookup{SourceRegister: reg32x00, SetName: vips.Name, SetID: vips.ID},
		), then...)
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: notDeclared(
		&expr.Dynset{SrcRegKey: reg32x00, SetName: undeclared.Name, SetID: undeclared.ID, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: UndeclaredIdle},
	)})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: notDeclared(&expr.Reject{Type: unix.NFT_REJECT_TCP_RST})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("refuse: write table ip %s: %w", TableName, err)
	}
	return nil
}

// tcp matches TCP.
func tcp() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
}

// syn matches a TCP SYN without ACK: a connection's first packet only.
func syn() []expr.Any {
	return append(tcp(),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
	)
}

// loadDest loads destination address . port into reg32x00 (and reg32x01).
func loadDest() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: reg32x00, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{DestRegister: reg32x01, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

// Update adds and deletes elements of the sets in one transaction. It is idempotent: adding
// an element already there keeps it (and its counter), and each deleted one is added first in
// the same transaction, so deleting one that is not there is no error (the kernel refuses to
// delete a missing element, which would fail the whole transaction).
func Update(c *nftables.Conn, add, del Sets) error {
	if add.empty() && del.empty() {
		return nil
	}
	t := table()
	for _, x := range []struct {
		set      *nftables.Set
		add, del []nftables.SetElement
	}{
		{refusedSet(t), elements(add.NoEndpoints), elements(del.NoEndpoints)},
		{vipSet(t), addrElements(add.VIPs), addrElements(del.VIPs)},
		{destSet(t, SetDeclared), elements(add.Declared), elements(del.Declared)},
	} {
		if all := append(slices.Clone(x.add), x.del...); len(all) > 0 {
			if err := c.SetAddElements(x.set, all); err != nil {
				return fmt.Errorf("refuse: add to set %s: %w", x.set.Name, err)
			}
		}
		if len(x.del) > 0 {
			if err := c.SetDeleteElements(x.set, x.del); err != nil {
				return fmt.Errorf("refuse: delete from set %s: %w", x.set.Name, err)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("refuse: update table ip %s: %w", TableName, err)
	}
	return nil
}

// Remove deletes the table; a table that is not there is no error.
func Remove(c *nftables.Conn) error {
	t := table()
	// Adding first makes the delete valid whether or not the table exists.
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("refuse: delete table ip %s: %w", TableName, err)
	}
	return nil
}

// Counts reads the counters of SetName and SetUndeclared.
func Counts(c *nftables.Conn) (Counted, error) {
	t := table()
	var out Counted
	for _, x := range []struct {
		set *nftables.Set
		to  *map[netip.AddrPort]uint64
	}{{refusedSet(t), &out.NoEndpoints}, {undeclaredSet(t), &out.NotDeclared}} {
		els, err := c.GetSetElements(x.set)
		if err != nil {
			return Counted{}, fmt.Errorf("refuse: list set %s: %w", x.set.Name, err)
		}
		*x.to = counts(els)
	}
	return out, nil
}

func counts(els []nftables.SetElement) map[netip.AddrPort]uint64 {
	out := make(map[netip.AddrPort]uint64, len(els))
	for _, e := range els {
		if len(e.Key) < 6 {
			continue
		}
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte(e.Key[:4])), binary.BigEndian.Uint16(e.Key[4:6]))
		if e.Counter != nil {
			out[ap] = e.Counter.Packets
		} else {
			out[ap] = 0
		}
	}
	return out
}

// elements are the keys of a destination set: address, then port padded to its register.
func elements(aps []netip.AddrPort) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(aps))
	for _, ap := range aps {
		k := make([]byte, 8)
		a := ap.Addr().As4()
		copy(k, a[:])
		binary.BigEndian.PutUint16(k[4:], ap.Port())
		out = append(out, nftables.SetElement{Key: k})
	}
	return out
}

func addrElements(as []netip.Addr) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(as))
	for _, a := range as {
		k := a.As4()
		out = append(out, nftables.SetElement{Key: k[:]})
	}
	return out
}

// List reads the sets the agent keeps, sorted: what the table refuses.
func List(c *nftables.Conn) (Sets, error) {
	t := table()
	var out Sets
	for _, x := range []struct {
		set  *nftables.Set
		dest *[]netip.AddrPort
		addr *[]netip.Addr
	}{{set: refusedSet(t), dest: &out.NoEndpoints}, {set: vipSet(t), addr: &out.VIPs}, {set: destSet(t, SetDeclared), dest: &out.Declared}} {
		els, err := c.GetSetElements(x.set)
		if err != nil {
			return Sets{}, fmt.Errorf("refuse: list set %s: %w", x.set.Name, err)
		}
		if x.dest != nil {
			*x.dest = slices.SortedFunc(maps.Keys(counts(els)), netip.AddrPort.Compare)
			continue
		}
		for _, e := range els {
			if len(e.Key) >= 4 {
				*x.addr = append(*x.addr, netip.AddrFrom4([4]byte(e.Key[:4])))
			}
		}
		slices.SortFunc(*x.addr, netip.Addr.Compare)
	}
	return out, nil
}

// Refuses says whether s refuses a SYN to d, and as what (contract.ReasonNoEndpoints or
// contract.ReasonPortNotDeclared); port 53 never.
func (s Sets) Refuses(d netip.AddrPort) (reason string, ok bool) {
	switch {
	case d.Port() == contract.DNSPort:
		return "", false
	case slices.Contains(s.NoEndpoints, d):
		return contract.ReasonNoEndpoints, true
	case slices.Contains(s.VIPs, d.Addr()) && !slices.Contains(s.Declared, d):
		return contract.ReasonPortNotDeclared, true
	}
	return "", false
}
