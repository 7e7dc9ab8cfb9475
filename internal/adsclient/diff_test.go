package adsclient

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDiffSortedMatchesMaps: on sorted sets the one-walk diff and the map diff say what the naive one says, and
// unsorted input still gets the map diff.
func TestDiffSortedMatchesMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	set := func() []string {
		var s []string
		for i := range 40 {
			if r.IntN(2) == 0 {
				s = append(s, fmt.Sprintf("svc:%03d", i))
			}
		}
		return s
	}
	for range 500 {
		old, next := set(), set()
		wa, wrm := diffNaive(old, next)
		for name, f := range map[string]func(_, _ []string) ([]string, []string){"diffSorted": diffSorted, "diffByMaps": diffByMaps} {
			if a, rm := f(old, next); !slices.Equal(a, wa) || !slices.Equal(rm, wrm) {
				t.Fatalf("%s(%v, %v) = %v, %v; want %v, %v", name, old, next, a, rm, wa, wrm)
			}
		}
	}
	a, rm := diff([]string{"b", "a"}, []string{"c", "a"})
	if !slices.Equal(a, []string{"c"}) || !slices.Equal(rm, []string{"b"}) {
		t.Errorf("unsorted: added %v removed %v, want [c] [b]", a, rm)
	}
}

// diffNaive is the reference: what is in next and not old, and in old and not next.
func diffNaive(old, next []string) (added, removed []string) {
	for _, n := range next {
		if !slices.Contains(old, n) {
			added = append(added, n)
		}
	}
	for _, n := range old {
		if !slices.Contains(next, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}
