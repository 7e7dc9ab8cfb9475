package svcindex

import (
	"net/netip"
	"slices"
)

// changeLogSize is how many recent Version bumps ChangesSince can answer for. A reader that
// fell further behind (or an index that saw a burst of more changes between two of its reads)
// is told to re-check everything, so the size bounds memory, not correctness.
const changeLogSize = 4096

// changeLog remembers, per recent Version, which ClusterIPs it touched; a bump that touched
// none moved the range. A ring: the oldest entry is overwritten.
type changeLog struct {
	entries [changeLogSize]change
	n       uint64 // entries recorded so far
}

type change struct {
	version uint64
	ips     []uint32 // nil: the range moved
}

func (l *changeLog) record(version uint64, ips []uint32) {
	l.entries[l.n%changeLogSize] = change{version: version, ips: ips}
	l.n++
}

// Changes is what changed in the index after a Version: the ClusterIPs whose Lookup answers
// may differ, or that the range moved (then any answer may differ).
type Changes struct {
	IPs        []netip.Addr // sorted, unique
	RangeMoved bool
}

// ChangesSince reports what changed after version since, up to the current Version. ok is
// false when the index no longer remembers that far back (more than a few thousand changes
// ago): the caller must then re-check every answer it keeps. A caller that re-checks only
// the answers at Changes.IPs (all of them when RangeMoved) does work proportional to what
// changed, not to what it keeps.
func (x *Index) ChangesSince(since uint64) (c Changes, now uint64, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	now = x.version.Load()
	if since >= now {
		return Changes{}, now, true
	}
	if now-since > changeLogSize || now-since > x.changes.n {
		return Changes{RangeMoved: true}, now, false
	}
	var ips []uint32
	for v := since + 1; v <= now; v++ {
		e := x.changes.entries[(x.changes.n-(now-v)-1)%changeLogSize]
		if e.version != v { // recorded out of step with Version: trust nothing
			return Changes{RangeMoved: true}, now, false
		}
		if e.ips == nil {
			c.RangeMoved = true
			continue
		}
		ips = append(ips, e.ips...)
	}
	slices.Sort(ips)
	for _, ip := range slices.Compact(ips) {
		c.IPs = append(c.IPs, addrOf(ip))
	}
	return c, now, true
}
