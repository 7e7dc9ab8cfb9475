// The pending set: refused on-demand names remembered, oldest evicted first, so a name whose
// Service appears later is admitted without the proxy asking again.

package agent

import "container/list"

// maxPending bounds the refused names remembered for later admission.
const maxPending = 1024

func (s *syncer) addPending(name string) {
	if s.demand.pending.add(name) {
		s.m.odEvicted.Inc()
	}
}

// pendingSet is an insertion-ordered set that evicts its oldest name beyond max.
type pendingSet struct {
	max   int
	order *list.List
	at    map[string]*list.Element
}

func newPendingSet(max int) pendingSet {
	return pendingSet{max: max, order: list.New(), at: map[string]*list.Element{}}
}

// add remembers name (a name already present keeps its place) and reports whether the oldest
// name was evicted to make room.
func (p *pendingSet) add(name string) bool {
	if _, ok := p.at[name]; ok {
		return false
	}
	p.at[name] = p.order.PushBack(name)
	if p.order.Len() <= p.max {
		return false
	}
	oldest := p.order.Front()
	delete(p.at, oldest.Value.(string))
	p.order.Remove(oldest)
	return true
}

func (p *pendingSet) remove(name string) {
	if e, ok := p.at[name]; ok {
		p.order.Remove(e)
		delete(p.at, name)
	}
}

func (p *pendingSet) len() int { return p.order.Len() }

// names lists the pending names, oldest first (a copy: the caller may remove while iterating).
func (p *pendingSet) names() []string {
	out := make([]string, 0, p.order.Len())
	for e := p.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(string))
	}
	return out
}
