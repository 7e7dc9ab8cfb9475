package result

import (
	"math"
	"slices"
	"sort"
)

// Dist is a distribution of latencies in milliseconds.
type Dist struct {
	N       int       `json:"n"`
	P50     float64   `json:"p50"`
	P90     float64   `json:"p90"`
	P99     float64   `json:"p99"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"` // sorted
}

// NewDist sorts samples and takes nearest-rank quantiles: the smallest
// sample with at least q of them at or below it (no interpolation; with 30
// samples p99 is the largest).
func NewDist(samples []float64) Dist {
	s := slices.Clone(samples)
	sort.Float64s(s)
	d := Dist{N: len(s), Samples: s}
	if len(s) == 0 {
		return d
	}
	d.P50, d.P90, d.P99 = Quantile(s, 0.5), Quantile(s, 0.9), Quantile(s, 0.99)
	d.Min, d.Max = s[0], s[len(s)-1]
	return d
}

// Quantile is the nearest-rank q-quantile of sorted (0 when empty).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sortScale(s []*Scale) {
	slices.SortFunc(s, func(a, b *Scale) int { return a.Services - b.Services })
}
