package agent

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// selected is the default settings with namespace selector text.
func selected(text string) settings {
	s := defaultSettings(true, true, agentstatus.CDSProactive)
	s.selector, s.sel = text, labels.SelectorFromSet(nil)
	if sel, err := labels.Parse(text); err == nil {
		s.sel = sel
	}
	return s
}

// same compares settings by what they say (a parsed selector does not compare).
func same(a, b settings) bool {
	return a.phase1 == b.phase1 && a.phase2 == b.phase2 && a.cds == b.cds && a.reset == b.reset && a.selector == b.selector &&
		a.sel.String() == b.sel.String()
}

func (s settings) String() string {
	return fmt.Sprintf("phase1=%v phase2=%v cds=%s reset=%v selector=%q", s.phase1, s.phase2, s.cds, s.reset, s.selector)
}

func TestParseSettings(t *testing.T) {
	def := defaultSettings(true, true, agentstatus.CDSProactive) // the agent's flag defaults
	// last: the settings in effect before, each differing from def.
	last := selected("team=a")
	last.phase1, last.phase2, last.cds, last.reset = false, false, agentstatus.CDSOnDemand, true
	with := func(s settings, f func(*settings)) settings { f(&s); return s }
	wantPhase := `want "true" or "false"`
	for _, tc := range []struct {
		name string
		data map[string]string
		last settings
		want settings
		errs []agentstatus.SettingError // Reason compared by prefix
	}{
		{name: "good values set", last: def,
			data: map[string]string{"phase1": "false", "phase2": "false", "cds": "on-demand", "namespaceSelector": "team=b"},
			want: with(selected("team=b"), func(s *settings) { s.phase1, s.phase2, s.cds = false, false, agentstatus.CDSOnDemand })},
		{name: "absent keys take the defaults, not the last values", data: map[string]string{}, last: last, want: def},
		{name: "phase1 off keeps Phase 1 off", data: map[string]string{"phase1": "off"}, last: last,
			want: with(def, func(s *settings) { s.phase1 = false }),
			errs: []agentstatus.SettingError{{Key: "phase1", Value: `"off"`, Kept: "false", Reason: wantPhase}}},
		{name: "phase1 maybe at start-up takes the default", data: map[string]string{"phase1": "maybe"}, last: def, want: def,
			errs: []agentstatus.SettingError{{Key: "phase1", Value: `"maybe"`, Kept: "true", Reason: wantPhase}}},
		{name: "cds x keeps the mode", data: map[string]string{"cds": "x"}, last: last,
			want: with(def, func(s *settings) { s.cds = agentstatus.CDSOnDemand }),
			errs: []agentstatus.SettingError{{Key: "cds", Value: `"x"`, Kept: "on-demand", Reason: `want "proactive" or "on-demand"`}}},
		{name: "refusal reset", data: map[string]string{"refusal": "reset"}, last: def,
			want: with(def, func(s *settings) { s.reset = true })},
		{name: "refusal close", data: map[string]string{"refusal": "close"}, last: last, want: def},
		{name: "refusal RST keeps reset", data: map[string]string{"refusal": "RST"}, last: last,
			want: with(def, func(s *settings) { s.reset = true }),
			errs: []agentstatus.SettingError{{Key: "refusal", Value: `"RST"`, Kept: "reset", Reason: `want "close" or "reset"`}}},
		{name: "refusal x at start-up takes close", data: map[string]string{"refusal": "x"}, last: def, want: def,
			errs: []agentstatus.SettingError{{Key: "refusal", Value: `"x"`, Kept: "close", Reason: `want "close" or "reset"`}}},
		{name: "a bad selector keeps the previous one", data: map[string]string{"namespaceSelector": "team in (a"}, last: last,
			want: selected("team=a"),
			errs: []agentstatus.SettingError{{Key: "namespaceSelector", Value: `"team in (a"`, Kept: "team=a", Reason: ""}}},
		{name: "the empty selector is kubectl's: every namespace", data: map[string]string{"namespaceSelector": ""}, last: last,
			want: selected("")},
		{name: "an unknown key changes nothing and does not block the good keys", last: last,
			data: map[string]string{"phase_1": "false", "phase2": "false"},
			want: with(def, func(s *settings) { s.phase2 = false }),
			errs: []agentstatus.SettingError{{Key: "phase_1", Value: `"false"`, Kept: "", Reason: "unknown key"}}},
		{name: "errors by key, each key on its own", last: last,
			data: map[string]string{"phase2": "yes", "phase1": "true", "cds": "on-demand ", "zone": "a"},
			want: with(def, func(s *settings) { s.phase2, s.cds = false, agentstatus.CDSOnDemand }),
			errs: []agentstatus.SettingError{{Key: "cds", Value: `"on-demand "`, Kept: "on-demand"}, {Key: "phase2", Value: `"yes"`, Kept: "false"},
				{Key: "zone", Value: `"a"`, Reason: "unknown key"}}},
	} {
		got, errs := parseSettings(tc.data, def, tc.last)
		if !same(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if len(errs) != len(tc.errs) {
			t.Errorf("%s: errors %+v, want %+v", tc.name, errs, tc.errs)
			continue
		}
		for i, e := range errs {
			w := tc.errs[i]
			if e.Key != w.Key || e.Value != w.Value || e.Kept != w.Kept || e.Reason == "" || !strings.HasPrefix(e.Reason, w.Reason) {
				t.Errorf("%s: error %+v, want %+v", tc.name, e, w)
			}
		}
	}
}

// Only what the docs say parses: not strconv.ParseBool's other spellings, nor a case or
// whitespace variant.
func TestParseSettingsIsStrict(t *testing.T) {
	def := defaultSettings(true, true, agentstatus.CDSProactive)
	for _, v := range []string{"off", "on", "no", "yes", "0", "1", "t", "f", "True", "FALSE", " true", "true\n", ""} {
		for _, k := range []string{contract.KeyPhase1, contract.KeyPhase2} {
			if _, errs := parseSettings(map[string]string{k: v}, def, def); len(errs) != 1 || errs[0].Key != k {
				t.Errorf("%s %q: errors %+v, want one", k, v, errs)
			}
		}
	}
	for _, v := range []string{"On-Demand", "ondemand", "PROACTIVE", " proactive", ""} {
		if _, errs := parseSettings(map[string]string{contract.KeyCDS: v}, def, def); len(errs) != 1 {
			t.Errorf("cds %q: errors %+v, want one", v, errs)
		}
	}
	for _, v := range []string{"Reset", "RESET", "reset ", "rst", "closed", "true", ""} {
		if _, errs := parseSettings(map[string]string{contract.KeyRefusal: v}, def, def); len(errs) != 1 || errs[0].Key != contract.KeyRefusal {
			t.Errorf("refusal %q: errors %+v, want one", v, errs)
		}
	}
	if _, err := ParseCDSMode("On-Demand"); err == nil || !strings.Contains(err.Error(), `"On-Demand"`) {
		t.Errorf("--cds On-Demand: %v, want an error naming it", err)
	}
}

// A long bad value is cut in /status (at a rune boundary), and says how long it was.
func TestParseSettingsBoundsWhatItShows(t *testing.T) {
	def := defaultSettings(true, true, agentstatus.CDSProactive)
	v := strings.Repeat("a", maxShownValue-1) + "é" + strings.Repeat("b", 1000)
	_, errs := parseSettings(map[string]string{contract.KeyPhase1: v, contract.KeyNamespaceSelector: "x=" + v}, def, def)
	if len(errs) != 2 {
		t.Fatalf("errors %+v", errs)
	}
	if want := fmt.Sprintf(`"%s"… (%d bytes)`, strings.Repeat("a", maxShownValue-1), len(v)); errs[1].Value != want {
		t.Errorf("value shown %s, want %s", errs[1].Value, want)
	}
	for _, e := range errs {
		if len(e.Value) > maxShownValue+32 || len(e.Reason) > maxShownReason+len("…") {
			t.Errorf("%s: value %d bytes, reason %d bytes: unbounded", e.Key, len(e.Value), len(e.Reason))
		}
	}
}

// liveSettings keeps the last good value across reads and logs once per change of the errors:
// an error at start-up (the defaults hold), a warning later, nothing for the same ConfigMap again.
func TestLiveSettings(t *testing.T) {
	var buf strings.Builder // read only by this goroutine, the only one logging
	var applied settings
	l := newLiveSettings(slog.New(slog.NewTextHandler(&buf, nil)), defaultSettings(true, true, agentstatus.CDSProactive),
		func(s settings, _ []agentstatus.SettingError) { applied = s })
	cm := func(d map[string]string) *corev1.ConfigMap { return &corev1.ConfigMap{Data: d} }
	lines := func(level string) int { return strings.Count(buf.String(), "level="+level) }

	st, errs := l.read(cm(map[string]string{"phase1": "maybe"}))
	if !st.phase1 || len(errs) != 1 {
		t.Fatalf("start-up phase1 maybe: %v %+v, want the default (true) and an error", st, errs)
	}
	l.read(cm(map[string]string{"phase1": "maybe"})) // Run's read and the informer's Add
	l.startedUp()
	if lines("ERROR") != 1 || lines("WARN") != 0 {
		t.Fatalf("start-up: want one error line:\n%s", buf.String())
	}
	if st, errs = l.read(cm(map[string]string{"phase1": "false"})); st.phase1 || len(errs) != 0 {
		t.Fatalf("phase1 false: %v %+v", st, errs)
	}
	if st, errs = l.read(cm(map[string]string{"phase1": "off"})); st.phase1 || applied.phase1 || len(errs) != 1 || errs[0].Kept != "false" {
		t.Fatalf("phase1 off after false: %v (applied %v) %+v, want false kept", st, applied, errs)
	}
	l.read(cm(map[string]string{"phase1": "off"}))
	if lines("WARN") != 1 || !strings.Contains(buf.String(), `phase1.value="\"off\"" phase1.reason="want \"true\" or \"false\"" phase1.kept=false`) {
		t.Fatalf("want one warning naming the value, the reason and the value kept:\n%s", buf.String())
	}
	// Deleted: the defaults, no errors.
	if st, errs = l.read(nil); !same(st, defaultSettings(true, true, agentstatus.CDSProactive)) || len(errs) != 0 {
		t.Fatalf("deleted: %v %+v", st, errs)
	}
}

// The syncer publishes the errors in /status and the metric even when no setting moved, and
// clears them.
func TestSettingsErrorsPublished(t *testing.T) {
	f := newFixture(t)
	f.sync(t)
	def := defaultSettings(true, true, agentstatus.CDSProactive)
	gauge := func(k string) float64 { return testutil.ToFloat64(f.s.m.settingsErrors.WithLabelValues(k)) }
	st, errs := parseSettings(map[string]string{"phase1": "off", "phase_1": "false", "x": "y"}, def, def)
	f.s.applySettings(st, errs)
	f.sync(t)
	got := f.s.status.Load()
	if !got.Phase1 || !slices.Equal(got.SettingsErrors, errs) || len(errs) != 3 {
		t.Fatalf("/status phase1 %v errors %+v, want true and %+v", got.Phase1, got.SettingsErrors, errs)
	}
	if gauge(contract.KeyPhase1) != 1 || gauge(contract.SettingsKeyUnknown) != 2 || gauge(contract.KeyCDS) != 0 {
		t.Errorf("gauges phase1 %v unknown %v cds %v, want 1 2 0", gauge(contract.KeyPhase1), gauge(contract.SettingsKeyUnknown), gauge(contract.KeyCDS))
	}
	f.s.applySettings(parseSettings(map[string]string{"phase1": "true"}, def, st))
	f.sync(t)
	if got := f.s.status.Load().SettingsErrors; got == nil || len(got) != 0 {
		t.Fatalf("/status errors after the fix %+v, want []", got)
	}
	for _, k := range settingsErrorKeys {
		if gauge(k) != 0 {
			t.Errorf("gauge %s %v after the fix", k, gauge(k))
		}
	}
}
