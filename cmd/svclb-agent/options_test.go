package main

import (
	"flag"
	"io"
	"testing"

	"github.com/aether-mesh/svclb/pkg/contract"
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

// TestHTTPListensOnThePodIP: the agent's HTTP listens on the pod IP the DaemonSet puts in
// contract.PodIPEnv (the node's InternalIP, which the apiserver's pod proxy and the kubelet
// dial), never on every interface by default, and on loopback when run outside a pod.
func TestHTTPListensOnThePodIP(t *testing.T) {
	for _, tc := range []struct {
		env         map[string]string
		args        []string
		http, local string
	}{
		{map[string]string{contract.PodIPEnv: "10.89.0.3", "NODE_NAME": "n"}, nil, "10.89.0.3:9750", ""},
		{nil, nil, "127.0.0.1:9750", ""},
		{map[string]string{contract.PodIPEnv: "10.89.0.3"}, []string{"--http=127.0.0.1:0", "--http-local=127.0.0.1:9750"}, "127.0.0.1:0", "127.0.0.1:9750"},
	} {
		o := parse(t, tc.env, tc.args...)
		if o.cfg.HTTPAddr != tc.http || o.cfg.HTTPLocalAddr != tc.local {
			t.Errorf("env %v args %q: --http %q --http-local %q, want %q %q", tc.env, tc.args, o.cfg.HTTPAddr, o.cfg.HTTPLocalAddr, tc.http, tc.local)
		}
	}
	if o := parse(t, map[string]string{"NODE_NAME": "kind-worker"}); o.cfg.NodeName != "kind-worker" {
		t.Errorf("node name %q from NODE_NAME", o.cfg.NodeName)
	}
}
