package nsselector

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Selector is a namespace selector as written and parsed.
type Selector struct {
	// Text is the selector as the ConfigMap spells it; "" matches every namespace.
	Text string
	Sel  labels.Selector
}

// Matches reports whether a namespace labelled ls is selected.
func (s Selector) Matches(ls map[string]string) bool { return s.Sel.Matches(labels.Set(ls)) }

// Default is contract.DefaultNamespaceSelector, parsed: the selector of an
// absent key.
func Default() Selector {
	s, err := Parse(contract.DefaultNamespaceSelector)
	if err != nil {
		panic(fmt.Sprintf("contract.DefaultNamespaceSelector: %v", err))
	}
	return s
}

// Parse reads a selector in kubectl's grammar (labels.Parse): "" is every
// namespace. The error is labels.Parse's, as is.
func Parse(text string) (Selector, error) {
	sel, err := labels.Parse(text)
	if err != nil {
		return Selector{}, err
	}
	return Selector{Text: text, Sel: sel}, nil
}

// Read applies the rule to a ConfigMap's data (nil: no ConfigMap): the key
// absent gives Default, a value that parses gives it, and one that does not
// gives last (the selector in effect: at start-up, Default) with Parse's
// error.
func Read(data map[string]string, last Selector) (Selector, error) {
	v, ok := data[contract.KeyNamespaceSelector]
	if !ok {
		return Default(), nil
	}
	s, err := Parse(v)
	if err != nil {
		return last, err
	}
	return s, nil
}

// Bounds of what a refused value puts into a status and a log: the ConfigMap
// is the operator's, up to 1 MiB.
const (
	MaxShownValue  = 64
	MaxShownReason = 256
)

// Shown quotes a refused value, cut to MaxShownValue bytes (at a rune
// boundary) with its length added.
func Shown(v string) string {
	if len(v) <= MaxShownValue {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cutRunes(v, MaxShownValue)), len(v))
}

// ShownReason cuts a parse error's text to MaxShownReason bytes, marking the cut.
func ShownReason(err error) string {
	s := err.Error()
	if len(s) <= MaxShownReason {
		return s
	}
	return cutRunes(s, MaxShownReason) + "…"
}

func cutRunes(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
