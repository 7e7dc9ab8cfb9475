package adsclient

import (
	"cmp"
	"slices"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// onDemand is the set of clusters requested by name (on-demand CDS over ADS) and what the
// server said of each, with the changes not yet sent on the stream.
//
// The bound. Envoy keeps every on-demand name subscribed until it restarts: over ADS,
// source/common/upstream/od_cds_api_impl.cc XdstpOdcdsSubscriptionsManager::addSubscription
// adds one subscription per name to subscriptions_ and nothing ever erases it, and a name the
// server removed stays requested (source/extensions/config_subscription/grpc/
// new_delta_subscription_state.cc NewDeltaSubscriptionState::handleGoodResponse marks it
// waiting for the server). OdCdsApiImpl::updateOnDemand (the non-xDS-TP path) keeps its
// "awaiting" names only until the first response and then requests each name again, never
// releasing one either. So with Envoy a scan of the Service range × ports leaves one
// subscription per destination for the life of the process, and only the agent's own bound
// (contract.OnDemandPendingMax, forgotten names) limits what it keeps of them.
//
// The built-in proxy departs from Envoy here, and only here: a name the server answered as
// removed (no such cluster) is "absent", and at most max absent names stay subscribed; past
// that the one dialled least recently is released (resource_names_unsubscribe), as a name
// would be by UnsubscribeCluster. A name whose cluster the server sent (present), or that is
// still unanswered (awaiting: a discovery may be waiting on it, or the agent keeps it pending
// to admit it when its Service appears), is never released by the bound, so a cluster in use
// is never lost to it. Dialling an absent name again (SubscribeCluster) makes it the most
// recent. A released name dialled again is subscribed again and answered again; the only cost
// is that a Service created later at a released address is no longer pushed before its first
// connection, which then waits one discovery instead. Awaiting names are bounded by the
// agent (it answers every name it does not keep pending as removed), present ones by
// --on-demand-max.
type onDemand struct {
	once sync.Once
	mu   sync.Mutex
	// max is the most absent names kept (<= 0: no bound, as Envoy).
	max    int
	byName map[string]*odName
	seq    uint64 // the next subscription's order
	// absent lists the absent names, least recently dialled first (by when they were
	// answered: each response's in the order they were dialled).
	absent odList
	// evicted counts the names the bound released.
	evicted uint64

	// pending holds each name whose subscription changed since the stream last sent it;
	// added and removed keep the order of those changes (a name may appear more than once:
	// only pending says what is to be sent).
	pending        map[string]odChange
	added, removed []string
	// kick wakes the stream loop, which owns the stream, to send the changes.
	kick chan struct{}
}

// odState is what the server said of a name.
type odState uint8

const (
	odAwaiting odState = iota // no answer yet
	odPresent                 // the server sent the cluster
	odAbsent                  // the server removed it: no such cluster
)

// odName is one subscribed name; prev and next link it in the absent list while absent.
type odName struct {
	name       string
	seq        uint64 // subscription order: a new stream subscribes in this order
	dial       uint64 // when last asked for, on the same clock
	state      odState
	prev, next *odName
}

// odChange is a subscription change waiting to be sent.
type odChange int8

const (
	// odSubscribe: the server does not have the name yet.
	odSubscribe odChange = iota + 1
	// odResubscribe: released and asked for again before the release was sent. It is sent as a
	// subscription, not as nothing, as Envoy does ("removed-then-added ... must be treated as a
	// new addition", NewDeltaSubscriptionState::updateSubscriptionInterest): the server answers
	// it again.
	odResubscribe
	// odUnsubscribe: the server has the name and is to forget it.
	odUnsubscribe
)

// odList is a doubly linked list of names with a sentinel.
type odList struct {
	root odName
	n    int
}

func (l *odList) init() { l.root.prev, l.root.next = &l.root, &l.root }

func (l *odList) pushBack(e *odName) {
	e.prev, e.next = l.root.prev, &l.root
	l.root.prev.next = e
	l.root.prev = e
	l.n++
}

func (l *odList) remove(e *odName) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	l.n--
}

func (l *odList) front() *odName {
	if l.n == 0 {
		return nil
	}
	return l.root.next
}

// init readies o with its bound, once.
func (o *onDemand) init(bound int) {
	o.once.Do(func() {
		o.max = bound
		o.byName, o.pending = map[string]*odName{}, map[string]odChange{}
		o.absent.init()
		o.kick = make(chan struct{}, 1)
	})
}

// subscribe asks for name and reports whether anything is to be sent.
func (o *onDemand) subscribe(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.byName[name]; e != nil {
		e.dial = o.seq
		o.seq++
		if e.state == odAbsent { // dialled again: the most recent
			o.absent.remove(e)
			o.absent.pushBack(e)
		}
		return false
	}
	o.byName[name] = &odName{name: name, seq: o.seq, dial: o.seq}
	o.seq++
	if o.pending[name] == odUnsubscribe {
		o.pending[name] = odResubscribe
	} else {
		o.pending[name] = odSubscribe
	}
	o.added = append(o.added, name)
	return true
}

// unsubscribe releases name and reports whether anything is to be sent.
func (o *onDemand) unsubscribe(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.releaseLocked(name)
}

func (o *onDemand) releaseLocked(name string) bool {
	e := o.byName[name]
	if e == nil {
		return false
	}
	if e.state == odAbsent {
		o.absent.remove(e)
	}
	delete(o.byName, name)
	if o.pending[name] == odSubscribe { // asked and released before it was sent
		delete(o.pending, name)
		return false
	}
	o.pending[name] = odUnsubscribe
	o.removed = append(o.removed, name)
	return true
}

// answered takes what a CDS response says of the names subscribed: a resource sent is
// present, a removal absent. Past max absent names it releases the least recently dialled
// ones; it reports how many, and whether anything is to be sent.
func (o *onDemand) answered(resources []*discoveryv3.Resource, removed []string) (released int, send bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range resources {
		if e := o.byName[r.GetName()]; e != nil && e.state != odPresent {
			if e.state == odAbsent {
				o.absent.remove(e)
			}
			e.state = odPresent
		}
	}
	var gone []*odName
	for _, name := range removed {
		if e := o.byName[name]; e != nil && e.state != odAbsent {
			e.state = odAbsent
			gone = append(gone, e)
		}
	}
	// A response lists its removals in no order (go-control-plane's come from a map).
	slices.SortFunc(gone, func(a, b *odName) int { return cmp.Compare(a.dial, b.dial) })
	for _, e := range gone {
		o.absent.pushBack(e)
	}
	for o.max > 0 && o.absent.n > o.max {
		send = o.releaseLocked(o.absent.front().name) || send
		released++
	}
	o.evicted += uint64(released)
	return released, send
}

// all returns every name subscribed, in subscription order, for a new stream, which sends
// them all: the changes so far are in them.
func (o *onDemand) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clearPendingLocked()
	es := make([]*odName, 0, len(o.byName))
	for _, e := range o.byName {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *odName) int { return cmp.Compare(a.seq, b.seq) })
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.name
	}
	return names
}

// changes returns the names to subscribe and to unsubscribe since the last call; no name is
// in both.
func (o *onDemand) changes() (sub, unsub []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range o.added {
		if c := o.pending[n]; c == odSubscribe || c == odResubscribe {
			sub = append(sub, n)
			delete(o.pending, n)
		}
	}
	for _, n := range o.removed {
		if o.pending[n] == odUnsubscribe {
			unsub = append(unsub, n)
			delete(o.pending, n)
		}
	}
	o.clearPendingLocked()
	return sub, unsub
}

func (o *onDemand) clearPendingLocked() {
	clear(o.pending)
	o.added, o.removed = nil, nil
}

func (o *onDemand) wake() {
	select {
	case o.kick <- struct{}{}:
	default: // a wake-up is already pending; it sends every change
	}
}

// OnDemandCounts is what a Client holds of the clusters requested on demand.
type OnDemandCounts struct {
	// Subscribed counts the names subscribed; Absent those of them the server answered as
	// removed. Evicted counts the absent names the bound released.
	Subscribed, Absent int
	Evicted            uint64
}

// OnDemand reports the on-demand subscriptions.
func (c *Client) OnDemand() OnDemandCounts {
	o := &c.od
	o.mu.Lock()
	defer o.mu.Unlock()
	return OnDemandCounts{Subscribed: len(o.byName), Absent: o.absent.n, Evicted: o.evicted}
}
