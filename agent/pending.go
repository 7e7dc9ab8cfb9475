// The pending set: refused on-demand names remembered until the proxy unsubscribes them, so a
// name whose Service appears later is admitted without the proxy asking again. It is not
// bounded apart from the proxy's own subscriptions: Envoy asks for an on-demand name over ADS
// once and keeps it subscribed (source/common/upstream/od_cds_api_impl.cc,
// XdstpOdcdsSubscriptionsManager::addSubscription skips a name already subscribed), so a name
// the agent forgot would never be admitted on that stream. A set bounded at 1024, oldest
// evicted, would lose names to a range scan (the soak's scan fault), and a Service later created
// at a scanned address would never be delivered to that node (every connection to it would time
// out). The proxy holds the same names, and go-control-plane's stream state holds them too.

package agent

import "container/list"

// pendingSet is an insertion-ordered set (admission goes oldest first).
type pendingSet struct {
	order *list.List
	at    map[string]*list.Element
}

func newPendingSet() pendingSet {
	return pendingSet{order: list.New(), at: map[string]*list.Element{}}
}

// add remembers name; a name already present keeps its place.
func (p *pendingSet) add(name string) {
	if _, ok := p.at[name]; ok {
		return
	}
	p.at[name] = p.order.PushBack(name)
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
