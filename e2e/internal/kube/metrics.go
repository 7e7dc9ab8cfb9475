package kube

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape in Prometheus text format.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses a /metrics body.
func ParseMetrics(b []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Metrics(mf), nil
}

// matches reports whether m carries labels; an absent label counts as "",
// as in Prometheus.
func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		got := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				got = lp.GetValue()
				break
			}
		}
		if got != v {
			return false
		}
	}
	return true
}

// Sum adds the counter or gauge values of every series of name whose labels
// include labels. A family that does not exist yet sums to 0: counters with
// labels appear on their first increment.
func (m Metrics) Sum(name string, labels map[string]string) float64 {
	mf, ok := m[name]
	if !ok {
		return 0
	}
	var s float64
	for _, x := range mf.GetMetric() {
		if !matches(x, labels) {
			continue
		}
		switch {
		case x.Counter != nil:
			s += x.GetCounter().GetValue()
		case x.Gauge != nil:
			s += x.GetGauge().GetValue()
		case x.Untyped != nil:
			s += x.GetUntyped().GetValue()
		}
	}
	return s
}

// Histogram is the cumulative buckets of one histogram, summed over series.
type Histogram struct {
	Count   float64
	Buckets []Bucket // sorted by UpperBound, cumulative
}

// Bucket is one cumulative histogram bucket.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram returns the buckets of name summed over every series whose
// labels include labels.
func (m Metrics) Histogram(name string, labels map[string]string) Histogram {
	mf, ok := m[name]
	if !ok {
		return Histogram{}
	}
	acc := map[float64]float64{}
	var h Histogram
	for _, x := range mf.GetMetric() {
		if x.Histogram == nil || !matches(x, labels) {
			continue
		}
		h.Count += float64(x.GetHistogram().GetSampleCount())
		for _, b := range x.GetHistogram().GetBucket() {
			acc[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	for ub, c := range acc {
		h.Buckets = append(h.Buckets, Bucket{UpperBound: ub, Count: c})
	}
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].UpperBound < h.Buckets[j].UpperBound })
	return h
}

// Sub returns h minus an earlier scrape of the same histogram: the
// observations made in between.
func (h Histogram) Sub(before Histogram) Histogram {
	prev := map[float64]float64{}
	for _, b := range before.Buckets {
		prev[b.UpperBound] = b.Count
	}
	out := Histogram{Count: h.Count - before.Count}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, Bucket{UpperBound: b.UpperBound, Count: b.Count - prev[b.UpperBound]})
	}
	return out
}

// Quantile returns the upper bound of the first bucket that holds the q-th
// observation; +Inf when it lies beyond the last finite bucket, 0 without
// observations. Upper bounds, not interpolation: with few samples an
// interpolated value would suggest a precision the buckets do not have.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 {
		return 0
	}
	rank := q * h.Count
	for _, b := range h.Buckets {
		if b.Count >= rank {
			return b.UpperBound
		}
	}
	return math.Inf(1)
}

// Series lists the label sets of name, for messages.
func (m Metrics) Series(name string) []string {
	mf, ok := m[name]
	if !ok {
		return nil
	}
	var out []string
	for _, x := range mf.GetMetric() {
		var ls []string
		for _, lp := range x.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
		}
		out = append(out, "{"+strings.Join(ls, ",")+"}")
	}
	return out
}

// Sorted returns h with its buckets in upper-bound order.
func (h Histogram) Sorted() Histogram {
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].UpperBound < h.Buckets[j].UpperBound })
	return h
}
