// The pending set: refused on-demand names remembered so that a name whose Service port
// appears later is admitted without the proxy asking again, bounded at
// contract.OnDemandPendingMax.
//
// Why a plain LRU is wrong: Envoy asks for an on-demand name over ADS once and keeps it
// subscribed (source/common/upstream/od_cds_api_impl.cc,
// XdstpOdcdsSubscriptionsManager::addSubscription skips a name already subscribed), so a name
// the agent forgot would never be admitted on that stream, and a Service later created at a
// scanned address would never reach that node.
//
// What the bound does instead. A name refused while the set is full (or dropped from it) is
// forgotten in two halves: the proxy is told now that it does not exist (the xDS server
// answers it in delta removed_resources; Envoy's OdCdsApi notifies the waiting connections
// Missing at once, NewDeltaSubscriptionState::handleGoodResponse keeps the name requested,
// waiting for the server), and the agent keeps one bit for its address (forgottenAddrs, a
// bit per address of the Service range at most). When a Service appears at a forgotten
// address every TCP port it declares is admitted: the proxy's wildcard CDS subscription
// receives the clusters, and its still-requested name among them. Only the port is lost, so a
// few undemanded ports may be published; the cap on admitted names still holds.
//
// Only a name in the Service range is remembered either way: outside it the capture listener
// passes connections through and the proxy never asks, so such a name is answered at once.

package agent

import (
	"container/list"
	"net/netip"
	"slices"
)

// pendingSet is an insertion-ordered set (admission goes oldest first), indexed by address
// so an index change re-checks only the names at the addresses it touched.
type pendingSet struct {
	max    int
	order  *list.List
	at     map[string]*list.Element
	byAddr nameIndex
}

// pendingName is one element of pendingSet.order.
type pendingName struct {
	name string
	addr netip.Addr
}

func newPendingSet(max int) pendingSet {
	return pendingSet{max: max, order: list.New(), at: map[string]*list.Element{}, byAddr: nameIndex{}}
}

func (p *pendingSet) has(name string) bool { _, ok := p.at[name]; return ok }

// full reports whether a new name would be refused.
func (p *pendingSet) full() bool { return p.order.Len() >= p.max }

// add remembers name at addr and reports whether it is remembered: a name already present
// keeps its place; a new one is refused when the set is full.
func (p *pendingSet) add(name string, addr netip.Addr) bool {
	if p.has(name) {
		return true
	}
	if p.full() {
		return false
	}
	p.at[name] = p.order.PushBack(pendingName{name, addr})
	p.byAddr.add(addr, name)
	return true
}

func (p *pendingSet) remove(name string) {
	if e, ok := p.at[name]; ok {
		p.byAddr.remove(e.Value.(pendingName).addr, name)
		p.order.Remove(e)
		delete(p.at, name)
	}
}

func (p *pendingSet) len() int { return p.order.Len() }

// names lists the pending names, oldest first (a copy: the caller may remove while iterating).
func (p *pendingSet) names() []string {
	out := make([]string, 0, p.order.Len())
	for e := p.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(pendingName).name)
	}
	return out
}

// nameIndex files cluster names under their address.
type nameIndex map[netip.Addr][]string

func (x nameIndex) add(a netip.Addr, name string) {
	if !slices.Contains(x[a], name) {
		x[a] = append(x[a], name)
	}
}

func (x nameIndex) remove(a netip.Addr, name string) {
	ns := slices.DeleteFunc(x[a], func(n string) bool { return n == name })
	if len(ns) == 0 {
		delete(x, a)
		return
	}
	x[a] = ns
}

// names lists the names at a (a copy).
func (x nameIndex) names(a netip.Addr) []string { return slices.Clone(x[a]) }

// addrSet is a set of IPv4 addresses, a bit each in 64-address words: a scan of a /16 costs at
// most 1024 words.
type addrSet struct {
	words map[uint32]uint64
	n     int
}

func newAddrSet() addrSet { return addrSet{words: map[uint32]uint64{}} }

func addrBits(a netip.Addr) (uint32, uint64) {
	b := a.As4()
	u := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return u >> 6, 1 << (u & 63)
}

func (s *addrSet) add(a netip.Addr) {
	w, bit := addrBits(a)
	if s.words[w]&bit == 0 {
		s.words[w] |= bit
		s.n++
	}
}

func (s *addrSet) has(a netip.Addr) bool {
	w, bit := addrBits(a)
	return s.words[w]&bit != 0
}

func (s *addrSet) remove(a netip.Addr) {
	w, bit := addrBits(a)
	if s.words[w]&bit == 0 {
		return
	}
	if s.words[w] &^= bit; s.words[w] == 0 {
		delete(s.words, w)
	}
	s.n--
}

func (s *addrSet) len() int { return s.n }

// all lists the addresses, in no particular order.
func (s *addrSet) all() []netip.Addr {
	out := make([]netip.Addr, 0, s.n)
	for w, bits := range s.words {
		for i := range uint32(64) {
			if bits&(1<<i) != 0 {
				u := w<<6 | i
				out = append(out, netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}))
			}
		}
	}
	return out
}
