package soak

import (
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/fixtures/cluster"
)

// TestLoadConfigNodeAccess: the soak reads the legs' setting, SVCLB_NODE_ACCESS (make soak
// NODE_ACCESS=…): empty chooses per cluster, docker or daemonset forces one, anything else
// is an error naming it.
func TestLoadConfigNodeAccess(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want cluster.NodeAccess
		err  string
	}{
		{"", "", ""},
		{"docker", cluster.NodeAccessDocker, ""},
		{"daemonset", cluster.NodeAccessDaemonSet, ""},
		{"ssh", "", `SVCLB_NODE_ACCESS="ssh": want docker or daemonset`},
	} {
		t.Setenv("SVCLB_NODE_ACCESS", tc.v)
		c, err := LoadConfig(t.TempDir())
		switch {
		case tc.err == "" && (err != nil || c.NodeAccess != tc.want):
			t.Errorf("SVCLB_NODE_ACCESS=%q: %q, %v; want %q", tc.v, c.NodeAccess, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("SVCLB_NODE_ACCESS=%q: error %v, want %q", tc.v, err, tc.err)
		}
	}
}
