package main

import (
	"flag"
	"io"
	"testing"
)

func parse(t *testing.T, env map[string]string, args ...string) options {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("svclb-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.define(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestHTTPListensOnLoopback: the agent's HTTP listens on 127.0.0.1 whatever the pod's
// environment says (on hostNetwork any other address is the node's, which every pod
// reaches); --http moves it.
func TestHTTPListensOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		http string
	}{
		{map[string]string{podIPEnv: "10.89.0.3", "NODE_NAME": "n"}, nil, "127.0.0.1:9750"},
		{nil, nil, "127.0.0.1:9750"},
		{map[string]string{podIPEnv: "10.89.0.3"}, []string{"--http=127.0.0.1:0"}, "127.0.0.1:0"},
	} {
		o := parse(t, tc.env, tc.args...)
		if o.cfg.HTTPAddr != tc.http {
			t.Errorf("env %v args %q: --http %q, want %q", tc.env, tc.args, o.cfg.HTTPAddr, tc.http)
		}
	}
	if o := parse(t, map[string]string{"NODE_NAME": "kind-worker"}); o.cfg.NodeName != "kind-worker" {
		t.Errorf("node name %q from NODE_NAME", o.cfg.NodeName)
	}
}

// podIPEnv is where a DaemonSet would put the pod's IP (downward API status.podIP): the
// listen address must not follow it.
const podIPEnv = "POD_IP"
