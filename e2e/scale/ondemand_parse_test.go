package scale

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteDemandFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demand.json")
	if err := writeDemandFile(path, []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:80"), netip.MustParseAddrPort("10.96.3.4:80")}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != `{"version":1,"clusters":["svc:10.96.0.10:80","svc:10.96.3.4:80"]}` {
		t.Fatalf("demand file %s, %v", b, err)
	}
	if err := writeDemandFile(path, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != `{"version":1,"clusters":[]}` {
		t.Errorf("empty demand file %s", b)
	}
	if err := writeDemandFile(filepath.Join(path, "under-a-file"), nil); err == nil {
		t.Error("no error writing under a file")
	}
}
