package main

import (
	"testing"
	"time"

	"github.com/aether-mesh/svclb/nodeproxy"
	"github.com/aether-mesh/svclb/pkg/contract"
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
		if o := mustParse(t, args); o.DrainTime != want {
			t.Errorf("%q: DrainTime %v, want %v", args, o.DrainTime, want)
		}
	}
}

// TestMaxDownstreamConnectionsFlag: the limit defaults to the contract's (the
// value Envoy's bootstrap carries); 0 is no limit, as Envoy without the
// resource monitor; a negative value is refused.
func TestMaxDownstreamConnectionsFlag(t *testing.T) {
	for args, want := range map[string]int64{
		"":                                 contract.ProxyMaxDownstreamConnections,
		"--max-downstream-connections=7":   7,
		"--max-downstream-connections=0":   0,
		"-max-downstream-connections=4096": 4096,
	} {
		if o := mustParse(t, args); o.MaxDownstreamConnections != want {
			t.Errorf("%q: MaxDownstreamConnections %d, want %d", args, o.MaxDownstreamConnections, want)
		}
	}
	if _, err := parseFlags([]string{"--max-downstream-connections=-1"}); err == nil {
		t.Error("a negative limit was accepted")
	}
}

// mustParse parses one flag argument ("" for none) or fails the test.
func mustParse(t *testing.T, arg string) nodeproxy.Options {
	t.Helper()
	var argv []string
	if arg != "" {
		argv = []string{arg}
	}
	o, err := parseFlags(argv)
	if err != nil {
		t.Fatalf("%q: %v", arg, err)
	}
	return o
}

// TestPprofFlag: off by default; on only with a loopback admin address.
func TestPprofFlag(t *testing.T) {
	if mustParse(t, "").Pprof {
		t.Error("pprof on by default")
	}
	if !mustParse(t, "-pprof").Pprof {
		t.Error("-pprof with the default (loopback) admin is not on")
	}
	o, err := parseFlags([]string{"-pprof", "-admin=[::1]:9901"})
	if err != nil || !o.Pprof {
		t.Errorf("-pprof on ::1: %v", err)
	}
	for _, admin := range []string{"-admin=0.0.0.0:9901", "-admin=10.0.0.1:9901", "-admin=:9901", "-admin="} {
		if _, err := parseFlags([]string{"-pprof", admin}); err == nil {
			t.Errorf("-pprof %s was accepted", admin)
		}
	}
}
