package nodeproxy

import (
	"net/http"
	"testing"
)

// TestAdminPprof: /debug/pprof/ is served only with Options.Pprof.
func TestAdminPprof(t *testing.T) {
	if code, _ := get(t, New(Options{}).AdminHandler(), "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without Pprof: %d, want 404", code)
	}
	if code, body := get(t, New(Options{Pprof: true}).AdminHandler(), "/debug/pprof/cmdline"); code != http.StatusOK || body == "" {
		t.Errorf("/debug/pprof/cmdline with Pprof: %d %q", code, body)
	}
}
