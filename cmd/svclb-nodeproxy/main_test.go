package main

import (
	"testing"
	"time"

	"github.com/aether-mesh/svclb/nodeproxy"
)

// TestDrainTimeFlag: --drain-time-s has Envoy's name and default (600 s)
// and reaches Options.DrainTime; 0 closes at the update, as in Envoy.
func TestDrainTimeFlag(t *testing.T) {
	for args, want := range map[string]time.Duration{
		"":                  600 * time.Second,
		"--drain-time-s=5":  5 * time.Second,
		"--drain-time-s=0":  -1,
		"-drain-time-s=600": nodeproxy.DefaultDrainTime,
	} {
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		o, err := parseFlags(argv)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if o.DrainTime != want {
			t.Errorf("%q: DrainTime %v, want %v", args, o.DrainTime, want)
		}
	}
}
