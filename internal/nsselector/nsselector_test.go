package nsselector

import (
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestRead is the rule both the agent and the guard follow.
func TestRead(t *testing.T) {
	last, err := Parse("team=a")
	if err != nil {
		t.Fatal(err)
	}
	enrolled := map[string]string{contract.MeshLabel: contract.MeshEnabled}
	for _, tc := range []struct {
		name     string
		data     map[string]string
		want     string
		bad      bool
		matches  map[string]string
		selected bool
	}{
		{"no ConfigMap", nil, contract.DefaultNamespaceSelector, false, enrolled, true},
		{"key absent", map[string]string{"phase1": "true"}, contract.DefaultNamespaceSelector, false, map[string]string{"team": "a"}, false},
		{"a selector", map[string]string{contract.KeyNamespaceSelector: "team=b"}, "team=b", false, map[string]string{"team": "b"}, true},
		{"empty: every namespace", map[string]string{contract.KeyNamespaceSelector: ""}, "", false, nil, true},
		{"bad: the last one kept", map[string]string{contract.KeyNamespaceSelector: "team in (a"}, "team=a", true, map[string]string{"team": "a"}, true},
	} {
		got, err := Read(tc.data, last)
		if got.Text != tc.want || (err != nil) != tc.bad || got.Matches(tc.matches) != tc.selected {
			t.Errorf("%s: got %q (matches %v: %v), err %v; want %q, bad %v, matches %v", tc.name, got.Text, tc.matches, got.Matches(tc.matches), err, tc.want, tc.bad, tc.selected)
		}
	}
}

func TestShown(t *testing.T) {
	if got := Shown("a=b"); got != `"a=b"` {
		t.Errorf("short: %s", got)
	}
	v := strings.Repeat("a", MaxShownValue-1) + "é" + strings.Repeat("b", 1000)
	if got, want := Shown(v), `"`+strings.Repeat("a", MaxShownValue-1)+`"… (1065 bytes)`; got != want {
		t.Errorf("long: %s, want %s", got, want)
	}
	_, err := Parse("x=" + strings.Repeat("é", 400))
	if err == nil {
		t.Fatal("a bad selector parses")
	}
	if r := ShownReason(err); len(r) > MaxShownReason+len("…") {
		t.Errorf("reason of %d bytes", len(r))
	}
}
