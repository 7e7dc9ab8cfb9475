// The refusal log: one sync's on-demand refusals summed into one line per reason.

package agent

// refusalLog sums one sync's refusals into one log line per reason, so a scan of the Service
// range costs a few lines, not one per name (each name is logged at debug level).
type refusalLog map[string]*refusalSum

type refusalSum struct {
	n        int
	examples []string
}

const refusalExamples = 3

func (r refusalLog) add(name, reason string) {
	sum := r[reason]
	if sum == nil {
		sum = &refusalSum{}
		r[reason] = sum
	}
	sum.n++
	if len(sum.examples) < refusalExamples {
		sum.examples = append(sum.examples, name)
	}
}

func (r refusalLog) flush(s *syncer) {
	for reason, sum := range r {
		s.log.Info("on-demand cluster names refused", "reason", reason, "count", sum.n, "examples", sum.examples)
	}
}
