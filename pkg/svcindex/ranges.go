package svcindex

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
)

// span is an inclusive IPv4 address interval. The range is kept as a sorted
// slice of disjoint, non-adjacent spans so that a lookup is a binary search
// over a handful of integers, without allocating.
type span struct{ lo, hi uint32 }

func v4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addrOf(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

func spanOf(p netip.Prefix) span {
	lo := v4(p.Masked().Addr())
	host := uint32(0)
	if p.Bits() < 32 {
		host = ^uint32(0) >> p.Bits()
	}
	return span{lo, lo | host}
}

// mergeSpans sorts, then merges overlapping and adjacent spans. It reuses in.
func mergeSpans(in []span) []span {
	if len(in) == 0 {
		return nil
	}
	slices.SortFunc(in, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	out := in[:1]
	for _, s := range in[1:] {
		last := &out[len(out)-1]
		// Adjacent spans merge too (last.hi+1 == s.lo), guarding the overflow at 255.255.255.255.
		if s.lo <= last.hi || (last.hi != ^uint32(0) && s.lo == last.hi+1) {
			last.hi = max(last.hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return slices.Clip(out)
}

// contains reports whether ip lies in one of the sorted, disjoint spans.
func contains(spans []span, ip uint32) bool {
	lo, hi := 0, len(spans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch {
		case ip < spans[m].lo:
			hi = m
		case ip > spans[m].hi:
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

// prefixesOf turns merged spans back into the fewest CIDR prefixes covering
// exactly the same addresses, in address order.
func prefixesOf(spans []span) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range spans {
		lo := uint64(s.lo)
		end := uint64(s.hi) + 1
		for lo < end {
			// The largest block aligned at lo that does not pass end.
			size := uint64(1) << 32
			if lo != 0 {
				size = uint64(1) << bits.TrailingZeros64(lo)
			}
			for size > end-lo {
				size >>= 1
			}
			out = append(out, netip.PrefixFrom(addrOf(uint32(lo)), 32-bits.TrailingZeros64(size)))
			lo += size
		}
	}
	return out
}
