package evidence

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// Flow is the attempts one client node made to one destination, as the
// clients saw them.
type Flow struct {
	// Node is the client's node ("" when the dialler did not say).
	Node string `json:"node"`
	// To is the destination, host:port.
	To          string         `json:"to"`
	Attempts    int            `json:"attempts"`
	Replies     int            `json:"replies"`
	ProxyClosed int            `json:"proxyClosed"`
	HostRefused int            `json:"hostRefused"`
	Timeouts    int            `json:"timeouts"`
	OtherErrors int            `json:"otherErrors"`
	Backends    map[string]int `json:"backends,omitempty"`
}

// Tally adds dial results to the run's counts, its backend distribution and
// its flows (per client node and destination: echo.Result ClientNode and
// To). zone names a node's zone, for replies whose backend did not report
// one.
func (r *Run) Tally(rs []echo.Result, zone func(node string) string) {
	if r.Backends == nil {
		r.Backends = map[string]int{}
	}
	for _, res := range rs {
		f := r.flow(res.ClientNode, res.To)
		r.Attempts++
		f.Attempts++
		switch echo.Outcome(res) {
		case echo.OutcomeReply:
			r.Replies++
			f.Replies++
			if res.Reply == nil { // an answer that names no backend (a TLS handshake, a DNS lookup)
				continue
			}
			k := BackendKey(res.Reply, zone)
			r.Backends[k]++
			if f.Backends == nil {
				f.Backends = map[string]int{}
			}
			f.Backends[k]++
		case echo.OutcomeHostRefused:
			r.HostRefused++
			f.HostRefused++
		case echo.OutcomeProxyClosed:
			r.ProxyClosed++
			f.ProxyClosed++
		case echo.OutcomeTimeout:
			r.Timeouts++
			f.Timeouts++
		default:
			r.OtherErrors++
			f.OtherErrors++
		}
	}
}

// flow is the run's flow of (node, to), added when new; flows stay sorted
// by node, then destination.
func (r *Run) flow(node, to string) *Flow {
	cmp := func(f Flow, _ struct{}) int {
		if c := strings.Compare(f.Node, node); c != 0 {
			return c
		}
		return strings.Compare(f.To, to)
	}
	i, found := slices.BinarySearchFunc(r.Flows, struct{}{}, cmp)
	if !found {
		r.Flows = slices.Insert(r.Flows, i, Flow{Node: node, To: to})
	}
	return &r.Flows[i]
}

// ClientNodes are the nodes the run's flows came from, sorted.
func (r *Run) ClientNodes() []string {
	var out []string
	for _, f := range r.Flows {
		if len(out) == 0 || out[len(out)-1] != f.Node {
			out = append(out, f.Node)
		}
	}
	return out
}

// FromNode sums the run's flows from node to the destinations in to (every
// destination when to is empty).
func (r *Run) FromNode(node string, to ...string) Flow {
	sum := Flow{Node: node}
	for _, f := range r.Flows {
		if f.Node != node || (len(to) > 0 && !slices.Contains(to, f.To)) {
			continue
		}
		sum.Attempts += f.Attempts
		sum.Replies += f.Replies
		sum.ProxyClosed += f.ProxyClosed
		sum.HostRefused += f.HostRefused
		sum.Timeouts += f.Timeouts
		sum.OtherErrors += f.OtherErrors
		for k, n := range f.Backends {
			if sum.Backends == nil {
				sum.Backends = map[string]int{}
			}
			sum.Backends[k] += n
		}
	}
	return sum
}

// BackendKey names a backend in distributions and timelines: pod@node/zone.
func BackendKey(rep *echo.Reply, zone func(node string) string) string {
	z := rep.Zone
	if z == "" {
		z = zone(rep.Node)
	}
	return fmt.Sprintf("%s@%s/%s", rep.Pod, rep.Node, z)
}

// Counts is the run's counts as one line: replies of attempts, then each
// kind of failure seen.
func (r *Run) Counts() string {
	return counts(r.Replies, r.Attempts, r.ProxyClosed, r.HostRefused, r.Timeouts, r.OtherErrors)
}

// Counts is the flow's counts as one line, as Run.Counts.
func (f Flow) Counts() string {
	return counts(f.Replies, f.Attempts, f.ProxyClosed, f.HostRefused, f.Timeouts, f.OtherErrors)
}

func counts(replies, attempts, proxyClosed, hostRefused, timeouts, other int) string {
	s := fmt.Sprintf("%d/%d replies", replies, attempts)
	for _, c := range []struct {
		n    int
		what string
	}{{proxyClosed, "proxy-closed"}, {hostRefused, "ECONNREFUSED"}, {timeouts, "timeouts"}, {other, "other errors"}} {
		if c.n > 0 {
			s += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return s
}
