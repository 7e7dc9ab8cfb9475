package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// TestNodeAddrsFlag: the pod spec's -node-addrs (status.hostIPs) reaches the capture's set of
// uncaptured node addresses, IPv6 entries skipped; a value that does not parse, or an
// unexpanded variable, stops the command with status 2 and the reason before anything is
// installed.
func TestNodeAddrsFlag(t *testing.T) {
	for _, bad := range []string{"$(SVCLB_NODE_IPS)", "172.18.0.3,", "127.0.0.1", "172.18.0.3 "} {
		var stderr bytes.Buffer
		if code := cli([]string{"-node-addrs=" + bad, "-netns=/nonexistent", "-wait=false"}, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), "-node-addrs") {
			t.Errorf("-node-addrs=%q: exit %d, stderr %q; want 2 naming the flag", bad, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := cli([]string{"-wait=false", "stray"}, &stderr); code != 2 {
		t.Errorf("a stray argument: exit %d, want 2 (%s)", code, stderr.String())
	}

	ns := netnstest.New(t)
	stderr.Reset()
	if code := cli([]string{"-netns=" + ns.Path(), "-wait=false", "-node-addrs=172.18.0.3,fc00:f853:ccd:e793::3"}, &stderr); code != 0 {
		t.Fatalf("install: exit %d: %s", code, stderr.String())
	}
	out, err := ns.Command("nft", "list", "set", "ip", capture.TableName, capture.NodeAddrsSet).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list set: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "elements = { 172.18.0.3 }") {
		t.Errorf("the capture's node addresses:\n%s\nwant exactly 172.18.0.3", out)
	}
}
