package suiterun

import "testing"

// TestLabelFilter: --legs as make's LEGS: names mean any of them, filter syntax stays.
func TestLabelFilter(t *testing.T) {
	for _, c := range []struct {
		legs []string
		want string
	}{
		{nil, "!opt-in"},
		{[]string{""}, "!opt-in"},
		{[]string{"reach"}, "reach"},
		{[]string{"reach affinity"}, "reach,affinity"},
		{[]string{"reach", "affinity"}, "reach,affinity"},
		{[]string{"leg && !hostile-scan"}, "leg && !hostile-scan"},
		{[]string{"reach", "leg && !drain"}, "reach,(leg && !drain)"},
	} {
		if got := LabelFilter(c.legs); got != c.want {
			t.Errorf("LabelFilter(%q) = %q, want %q", c.legs, got, c.want)
		}
	}
}
