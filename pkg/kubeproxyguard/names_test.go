package kubeproxyguard

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestParseName(t *testing.T) {
	demo := types.NamespacedName{Namespace: "default", Name: "demo"}
	for _, tc := range []struct {
		name string
		ok   bool
		svc  types.NamespacedName
		port string
		ep   string
	}{
		{"service-C642UMGT-default/demo/tcp/http", true, demo, "http", ""},
		{"external-C642UMGT-default/demo/tcp/http", true, demo, "http", ""},
		{"local-2Q7NANCK-default/demo/tcp/", true, demo, "", ""},
		{"firewall-C642UMGT-default/demo/udp/dns", true, demo, "dns", ""},
		{"endpoint-AJJQKKJ6-default/demo/tcp/http__10.244.1.10/8080", true, demo, "http", "10.244.1.10/8080"},
		// Stock chains and malformed names never match.
		{"services", false, types.NamespacedName{}, "", ""},
		{"service-endpoints-check", false, types.NamespacedName{}, "", ""},
		{"service-ips", false, types.NamespacedName{}, "", ""},
		{"service-c642umgt-default/demo/tcp/http", false, types.NamespacedName{}, "", ""},
		{"service-C642UMGT-default/demo/tcp", false, types.NamespacedName{}, "", ""},
		{"endpoint-AJJQKKJ6-default/demo/tcp/http", false, types.NamespacedName{}, "", ""},
		{"service-C642UMGT-default/demo/tcp/http__10.0.0.1/80", false, types.NamespacedName{}, "", ""},
		{"affinity-AJJQKKJ6-default/demo/tcp/http__10.244.1.10/8080", false, types.NamespacedName{}, "", ""},
	} {
		n, ok := parseChainName(tc.name)
		if ok != tc.ok {
			t.Errorf("%s: ok=%v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if ok && (n.Service != tc.svc || n.PortName != tc.port || n.Endpoint != tc.ep) {
			t.Errorf("%s: got %+v", tc.name, n)
		}
	}
}

func TestParseComment(t *testing.T) {
	for c, want := range map[string]types.NamespacedName{
		"default/empty:5353-53": {Namespace: "default", Name: "empty"},
		"ns/svc:":               {Namespace: "ns", Name: "svc"},
		"default/empty":         {},
		"":                      {},
		"a/b/c:p":               {},
	} {
		got, ok := parseComment(c)
		if ok != (want != types.NamespacedName{}) || got != want {
			t.Errorf("parseComment(%q) = %v, %v", c, got, ok)
		}
	}
}

func FuzzParseName(f *testing.F) {
	f.Add("endpoint-AJJQKKJ6-default/demo/tcp/http__10.244.1.10/8080")
	f.Add("service-C642UMGT-default/demo/tcp/http")
	f.Add("services")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseChainName(s)
		if ok && (n.Service.Namespace == "" || n.Service.Name == "") {
			t.Fatalf("%q parsed without a Service: %+v", s, n)
		}
	})
}
