package refuse

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the table (family ip) in the pod's netns; SetName its set.
const (
	TableName = "svclb_refuse"
	SetName   = "refused"
	// Priority runs the chain before the capture's output chain (mangle,
	// -150): a refused SYN is never marked for the proxy.
	Priority = -160
)

// The kernel's 32-bit registers: a concatenation is loaded into consecutive ones.
const (
	reg32x00 = 8 // NFT_REG32_00
	reg32x01 = 9
)

func table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
}

func set(t *nftables.Table) *nftables.Set {
	return &nftables.Set{
		Table: t, Name: SetName, Counter: true,
		KeyType:       nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService),
		Concatenation: true,
	}
}

// Install (re)creates the table in the netns c talks to, with refused in the
// set, in one transaction.
func Install(c *nftables.Conn, refused []netip.AddrPort) error {
	t := table()
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	s := set(t)
	if err := c.AddSet(s, elements(refused)); err != nil {
		return fmt.Errorf("refuse: set %s: %w", SetName, err)
	}
	prio := nftables.ChainPriority(Priority)
	ch := c.AddChain(&nftables.Chain{
		Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: &prio,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		// A SYN without ACK: the connection's first packet only.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
		&expr.Payload{DestRegister: reg32x00, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{DestRegister: reg32x01, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: reg32x00, SetName: s.Name, SetID: s.ID},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("refuse: write table ip %s: %w", TableName, err)
	}
	return nil
}

// Update adds and deletes refused destinations in one transaction. It is idempotent: adding
// a destination already there keeps it (and its counter), and each deleted one is added first
// in the same transaction, so deleting one that is not there is no error (the kernel refuses
// to delete a missing element, which would fail the whole transaction).
func Update(c *nftables.Conn, add, del []netip.AddrPort) error {
	if len(add) == 0 && len(del) == 0 {
		return nil
	}
	s := set(table())
	if all := append(slices.Clone(add), del...); len(all) > 0 {
		if err := c.SetAddElements(s, elements(all)); err != nil {
			return fmt.Errorf("refuse: add to set %s: %w", SetName, err)
		}
	}
	if len(del) > 0 {
		if err := c.SetDeleteElements(s, elements(del)); err != nil {
			return fmt.Errorf("refuse: delete from set %s: %w", SetName, err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("refuse: update set %s: %w", SetName, err)
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

// Counts are the refusals (SYNs reset) per destination since it entered the set.
func Counts(c *nftables.Conn) (map[netip.AddrPort]uint64, error) {
	els, err := c.GetSetElements(set(table()))
	if err != nil {
		return nil, fmt.Errorf("refuse: list set %s: %w", SetName, err)
	}
	out := map[netip.AddrPort]uint64{}
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
	return out, nil
}

// elements are the set keys: address, then port padded to its register.
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
