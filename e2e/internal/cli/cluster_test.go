package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/kindconfig"
)

func TestClusterOptionsResolve(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "portable.yaml")
	if err := os.WriteFile(cfg, kindconfig.PortableYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &clusterOptions{config: cfg}
	c, err := o.resolve("/repo")
	if err != nil {
		t.Fatal(err)
	}
	if o.name != "alt" || c.Name != "alt" {
		t.Errorf("name = %q (config %q), want alt from the config", o.name, c.Name)
	}
	if o.kubeconfigOut != "/repo/_output/kubeconfig-alt" {
		t.Errorf("kubeconfigOut = %q", o.kubeconfigOut)
	}
	o = &clusterOptions{config: cfg, name: "other", kubeconfigOut: "/k"}
	if _, err := o.resolve("/repo"); err != nil || o.name != "other" || o.kubeconfigOut != "/k" {
		t.Errorf("flags not kept: %+v %v", o, err)
	}
}

// TestClusterCreateBadInput: bad input is a usage error (exit 2) naming what is wrong,
// before kind is called.
func TestClusterCreateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	raw := strings.Replace(string(kindconfig.PortableYAML), "kubeProxyMode: nftables", "kubeProxyMode: iptables", 1)
	if err := os.WriteFile(bad, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "create"}, "--kind-config is required"},
		{[]string{"cluster", "create", "--kind-config", filepath.Join(dir, "none.yaml")}, "reading kind config"},
		{[]string{"cluster", "create", "--kind-config", bad}, "kubeProxyMode"},
		{[]string{"cluster", "delete"}, "--name is required"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append(tc.args, "--repo", dir), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}
