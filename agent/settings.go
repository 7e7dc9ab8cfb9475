// Settings: what the agent's ConfigMap says (phases, CDS mode, namespace selector). All of the
// ConfigMap's parsing is here, the --cds flag's grammar with it.

package agent

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/svclb/internal/nsselector"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// settings are the agent's live settings, one per key of the ConfigMap.
type settings struct {
	phase1, phase2 bool                // contract.KeyPhase1, KeyPhase2
	cds            agentstatus.CDSMode // contract.KeyCDS
	selector       string              // contract.KeyNamespaceSelector, as written
	sel            labels.Selector     // selector, parsed
	reset          bool                // contract.KeyRefusal is contract.RefusalReset
}

// defaultSettings are the settings before any ConfigMap: the flags', and the default selector.
func defaultSettings(phase1, phase2 bool, cds agentstatus.CDSMode) settings {
	text, sel := defaultSelector()
	return settings{phase1: phase1, phase2: phase2, cds: cds, selector: text, sel: sel}
}

// defaultSelector is contract.DefaultNamespaceSelector, parsed (nsselector.Default).
func defaultSelector() (string, labels.Selector) {
	d := nsselector.Default()
	return d.Text, d.Sel
}

// maxShownValue and maxShownReason bound what a bad value puts into /status and the log: the
// ConfigMap is the operator's, up to 1 MiB.
const (
	maxShownValue  = 64
	maxShownReason = 256
)

// errBool is the phases' grammar: strictly what the docs say, so that a value meant as "off"
// never reads as anything (strconv.ParseBool would take "0", "F" and "TRUE", and refuse "off").
var errBool = errors.New(`want "true" or "false"`)

func parseBool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errBool
}

// parseCDS is the CDS mode's grammar, the --cds flag's and the ConfigMap's: exactly one of the
// modes' names.
func parseCDS(s string) (agentstatus.CDSMode, error) {
	switch m := agentstatus.CDSMode(s); m {
	case agentstatus.CDSProactive, agentstatus.CDSOnDemand:
		return m, nil
	}
	return "", fmt.Errorf("want %q or %q", agentstatus.CDSProactive, agentstatus.CDSOnDemand)
}

// parseRefusal is contract.KeyRefusal's grammar: exactly one of its values; reset is true for
// contract.RefusalReset.
func parseRefusal(s string) (reset bool, err error) {
	switch s {
	case contract.RefusalClose:
		return false, nil
	case contract.RefusalReset:
		return true, nil
	}
	return false, fmt.Errorf("want %q or %q", contract.RefusalClose, contract.RefusalReset)
}

// refusalName is the value that sets reset.
func refusalName(reset bool) string {
	if reset {
		return contract.RefusalReset
	}
	return contract.RefusalClose
}

// ParseCDSMode parses a --cds flag value.
func ParseCDSMode(s string) (agentstatus.CDSMode, error) {
	m, err := parseCDS(s)
	if err != nil {
		return "", fmt.Errorf("CDS mode %q: %w", s, err)
	}
	return m, nil
}

// parseSettings turns the ConfigMap's data into the settings in effect. Each key sets its own
// setting: a value that parses sets it, an absent key takes def's, and a value that does not
// parse keeps last's (the setting's last good value; at start-up, def's) and is reported. So is
// a key the agent does not know; it changes nothing. The errors are sorted by key.
func parseSettings(data map[string]string, def, last settings) (settings, []agentstatus.SettingError) {
	cur := def
	var errs []agentstatus.SettingError
	refuse := func(key, value, kept string, err error) {
		errs = append(errs, agentstatus.SettingError{Key: key, Value: shownValue(value), Kept: kept, Reason: clip(err.Error(), maxShownReason)})
	}
	phase := func(key string, set *bool, last bool) {
		v, ok := data[key]
		if !ok {
			return
		}
		b, err := parseBool(v)
		if err != nil {
			*set = last
			refuse(key, v, strconv.FormatBool(last), err)
			return
		}
		*set = b
	}
	phase(contract.KeyPhase1, &cur.phase1, last.phase1)
	phase(contract.KeyPhase2, &cur.phase2, last.phase2)
	if v, ok := data[contract.KeyCDS]; ok {
		m, err := parseCDS(v)
		if err != nil {
			m = last.cds
			refuse(contract.KeyCDS, v, string(m), err)
		}
		cur.cds = m
	}
	if v, ok := data[contract.KeyRefusal]; ok {
		r, err := parseRefusal(v)
		if err != nil {
			r = last.reset
			refuse(contract.KeyRefusal, v, refusalName(r), err)
		}
		cur.reset = r
	}
	// The selector's rule is shared with the guard (internal/nsselector).
	sel, err := nsselector.Read(data, nsselector.Selector{Text: last.selector, Sel: last.sel})
	cur.selector, cur.sel = sel.Text, sel.Sel
	if err != nil {
		refuse(contract.KeyNamespaceSelector, data[contract.KeyNamespaceSelector], last.selector, err)
	}
	for k, v := range data {
		if !slices.Contains(settingsKeys, k) {
			refuse(k, v, "", fmt.Errorf("unknown key: the agent reads %s", strings.Join(settingsKeys, ", ")))
		}
	}
	slices.SortFunc(errs, func(a, b agentstatus.SettingError) int { return cmp.Compare(a.Key, b.Key) })
	return cur, errs
}

// settingsKeys are the ConfigMap keys the agent reads.
var settingsKeys = []string{contract.KeyCDS, contract.KeyNamespaceSelector, contract.KeyPhase1, contract.KeyPhase2, contract.KeyRefusal}

// shownValue quotes v, cut to maxShownValue bytes (at a rune boundary).
func shownValue(v string) string {
	if len(v) <= maxShownValue {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(cutRunes(v, maxShownValue)), len(v))
}

// clip cuts s to at most n bytes (at a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutRunes(s, n) + "…"
}

func cutRunes(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// liveSettings reads the ConfigMap on every change of it: it keeps the settings in effect, so a
// bad value keeps the last good one, hands them to apply, and logs each change of the
// ConfigMap's errors once (the informer may deliver the same ConfigMap again, and Run reads it
// once more at start-up).
type liveSettings struct {
	log   *slog.Logger
	def   settings
	apply func(settings, []agentstatus.SettingError)

	mu      sync.Mutex // Run's read at start-up and the informer's handler, applied in order
	cur     settings
	errs    []agentstatus.SettingError
	running bool // start-up is over: what is in effect was in effect before
}

func newLiveSettings(log *slog.Logger, def settings, apply func(settings, []agentstatus.SettingError)) *liveSettings {
	return &liveSettings{log: log, def: def, apply: apply, cur: def}
}

// read applies the ConfigMap o (nil or not a ConfigMap: deleted, so the defaults) and returns
// the settings in effect and its errors.
func (l *liveSettings) read(o any) (settings, []agentstatus.SettingError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, errs := l.def, []agentstatus.SettingError(nil)
	if cm, ok := o.(*corev1.ConfigMap); ok {
		cur, errs = parseSettings(cm.Data, l.def, l.cur)
	}
	if !slices.Equal(errs, l.errs) {
		l.report(errs)
	}
	l.cur, l.errs = cur, errs
	l.apply(cur, slices.Clone(errs))
	return cur, errs
}

// startedUp says start-up is over: from now on a bad value keeps a value that was in effect.
func (l *liveSettings) startedUp() {
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
}

// report logs the ConfigMap's errors, which just changed: one line for all of them. At start-up
// there was no good value to keep, so the defaults hold: an error, not a warning.
func (l *liveSettings) report(errs []agentstatus.SettingError) {
	attrs := []any{"configmap", contract.Namespace + "/" + contract.AgentConfigMap}
	if len(errs) == 0 {
		l.log.Info("every value of the agent ConfigMap is in effect", attrs...)
		return
	}
	for _, e := range errs {
		g := []any{"value", e.Value, "reason", e.Reason}
		if slices.Contains(settingsKeys, e.Key) {
			g = append(g, "kept", e.Kept)
		}
		attrs = append(attrs, slog.Group(e.Key, g...))
	}
	if !l.running {
		l.log.Error("agent ConfigMap values not used at start-up: with no good value yet, their defaults hold", attrs...)
		return
	}
	l.log.Warn("agent ConfigMap values not used: their settings keep their last good values", attrs...)
}
