package evidence

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
)

// WriteOrder records the legs the suite defines, in the order it runs them
// (order.json): the report lists legs in the run's order, so the suite's
// list is the only copy of it.
func (d Dir) WriteOrder(legs []string) error { return d.writeJSON("order.json", legs) }

// loadOrder reads order.json; nil when the run recorded none (evidence of
// a suite older than the record).
func (d Dir) loadOrder() ([]string, error) {
	var order []string
	if err := d.readJSON("order.json", &order); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return order, nil
}

// ByOrder compares leg names by their place in order; names it does not
// list come after those it does, by name. With no order (old evidence)
// that is name order.
func ByOrder(order []string) func(a, b string) int {
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	return func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	}
}
