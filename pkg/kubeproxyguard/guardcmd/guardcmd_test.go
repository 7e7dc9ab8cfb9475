package guardcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/pkg/contract"
)

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage:"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"delete"}, 2, "NS/NAME"},
		{[]string{"watch", "default"}, 2, "want NAMESPACE/NAME"},
		{[]string{"delete", "Default/demo"}, 2, "namespace"},
		{[]string{"delete", "default/a/b"}, 2, "want NAMESPACE/NAME"},
		{[]string{"delete", "default/9demo"}, 2, "Service name"},
		{[]string{"run", "extra"}, 2, "unexpected arguments"},
		{[]string{"delete", "default/demo", "default/kubernetes"}, 2, `"default/kubernetes": refusing: the apiserver's Service`},
		{[]string{"watch", "default/kubernetes"}, 2, "stays on kube-proxy's path"},
		{[]string{"list", "-h"}, 0, "-json"},
		{[]string{"run", "-namespace-selector", "svclb.dev/mesh in (enabled"}, 2, "-namespace-selector"},
		{[]string{"run", "-h"}, 0, "-namespace-selector"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%q: code %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}

func TestParseServices(t *testing.T) {
	got, err := parseServices([]string{"default/demo", "kube-system/kube-dns"})
	if err != nil || len(got) != 2 || got[1].Namespace != "kube-system" || got[1].Name != "kube-dns" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// TestNamespaceSelector: empty is label mode; a malformed selector is a usage error.
func TestNamespaceSelector(t *testing.T) {
	if sel, err := namespaceSelector(" "); sel != nil || err != nil {
		t.Errorf("empty: got %v, %v; want label mode", sel, err)
	}
	sel, err := namespaceSelector(contract.DefaultNamespaceSelector)
	if err != nil || sel.String() != contract.DefaultNamespaceSelector {
		t.Errorf("default: got %v, %v", sel, err)
	}
	if _, err := namespaceSelector("!"); err == nil {
		t.Error("a malformed selector is accepted")
	}
}
