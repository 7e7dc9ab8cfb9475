package kubeproxyguard

import (
	"slices"
	"testing"
)

// A key of service-ips or no-endpoint-services as the kernel returns it
// (each field padded to 4 bytes) is taken apart into its ClusterIP,
// protocol and port, and only TCP ports other than 53 are the meshed
// path's: the guard cuts them and leaves every other port to kube-proxy.
func TestMapKey(t *testing.T) {
	for _, tc := range []struct {
		key        []byte
		nft, port  string
		leftReason string
	}{
		{[]byte{10, 96, 100, 100, 6, 0, 0, 0, 0, 80, 0, 0}, "10.96.100.100 . tcp . 80", "tcp/80", ""},
		{[]byte{10, 96, 0, 10, 6, 0, 0, 0, 0x23, 0xc1, 0, 0}, "10.96.0.10 . tcp . 9153", "tcp/9153", ""},
		{[]byte{10, 96, 0, 10, 6, 0, 0, 0, 0, 53, 0, 0}, "10.96.0.10 . tcp . 53", "tcp/53", "tcp/53: DNS passes through the capture"},
		{[]byte{10, 96, 0, 10, 17, 0, 0, 0, 0, 53, 0, 0}, "10.96.0.10 . udp . 53", "udp/53", "udp: not served by the agent"},
		{[]byte{10, 96, 0, 10, 17, 0, 0, 0, 0, 80, 0, 0}, "10.96.0.10 . udp . 80", "udp/80", "udp: not served by the agent"},
		{[]byte{10, 96, 0, 10, 132, 0, 0, 0, 0x27, 0x0f, 0, 0}, "10.96.0.10 . sctp . 9999", "sctp/9999", "sctp: not served by the agent"},
	} {
		k, ok := parseMapKey(tc.key)
		if !ok {
			t.Fatalf("parseMapKey(%x) failed", tc.key)
		}
		if k.String() != tc.nft || formatKey(tc.key) != tc.nft || k.port() != tc.port || k.leftToKubeProxy() != tc.leftReason {
			t.Errorf("%x: %q, %q, %q; want %q, %q, %q", tc.key, k.String(), k.port(), k.leftToKubeProxy(), tc.nft, tc.port, tc.leftReason)
		}
	}
	for _, k := range [][]byte{nil, {6, 0, 0, 0, 0, 80, 0, 0}, make([]byte, 16)} {
		if _, ok := parseMapKey(k); ok {
			t.Errorf("parseMapKey(%x) accepted a key that is not ipv4_addr . inet_proto . inet_service", k)
		}
	}
	keys := []mapKey{{Proto: 17, Port: 514}, {Proto: 6, Port: 80}, {Proto: 17, Port: 53}, {Proto: 6, Port: 53}, {Proto: 17, Port: 53}}
	var got []string
	for _, k := range sortedPorts(keys) {
		got = append(got, k.port())
	}
	if want := []string{"tcp/53", "tcp/80", "udp/53", "udp/514"}; !slices.Equal(got, want) {
		t.Errorf("sortedPorts: %v, want %v", got, want)
	}
}
