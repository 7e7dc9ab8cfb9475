package suiterun

import "strings"

// OptInFilter is what runs without --legs: every leg and figure except the opt-in ones
// (label opt-in: the cni-latency figure starts 100 pods), as make e2e-svc without LEGS.
const OptInFilter = "!opt-in"

// LabelFilter makes --legs (each value one or more words) a Ginkgo label filter. A value
// with filter syntax (& | ! ( ) , / :) is taken as written; plain names mean any of them
// ("reach affinity" is reach,affinity): Ginkgo would read the words as one label and run
// nothing. None is OptInFilter.
func LabelFilter(legs []string) string {
	var names []string
	for _, v := range legs {
		if strings.ContainsAny(v, "&|!(),/:") {
			if len(legs) == 1 {
				return strings.TrimSpace(v)
			}
			names = append(names, "("+strings.TrimSpace(v)+")")
			continue
		}
		names = append(names, strings.Fields(v)...)
	}
	if len(names) == 0 {
		return OptInFilter
	}
	return strings.Join(names, ",")
}
