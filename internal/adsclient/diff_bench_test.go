package adsclient

import (
	"fmt"
	"testing"
)

// BenchmarkDiff: the EDS subscription diff after a CDS response with 5,000 names, one added:
// the sorted walk against the map diff.
func BenchmarkDiff(b *testing.B) {
	var old []string
	for i := range 5000 {
		old = append(old, fmt.Sprintf("svc:10.96.%d.%d:80", i/250, i%250))
	}
	next := append(append([]string(nil), old...), "svc:10.96.99.1:80")
	b.Run("sorted", func(b *testing.B) {
		for b.Loop() {
			diffSorted(old, next)
		}
	})
	b.Run("maps", func(b *testing.B) {
		for b.Loop() {
			diffByMaps(old, next)
		}
	})
}
