package cniinstall

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func testEntry() map[string]any {
	return Entry(contract.EnrollSocket, "60s", []string{"kube-system"})
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// TestInsertRemove: the conflists of the offline cluster (flannel, read off its node) and of
// kindest/node (kindnet) get the plugin appended last; a second insert changes nothing;
// remove gives back the original.
func TestInsertRemove(t *testing.T) {
	for _, name := range []string{"flannel", "kindnet"} {
		t.Run(name, func(t *testing.T) {
			orig := read(t, "testdata/"+name+".conflist")
			out, changed, err := Insert(orig, testEntry())
			if err != nil || !changed {
				t.Fatalf("insert: changed=%v err=%v", changed, err)
			}
			golden.Check(t, "testdata/"+name+".inserted.golden", out)

			again, changed, err := Insert(out, testEntry())
			if err != nil || changed || string(again) != string(out) {
				t.Errorf("second insert: changed=%v err=%v", changed, err)
			}
			back, changed, err := Remove(out)
			if err != nil || !changed {
				t.Fatalf("remove: changed=%v err=%v", changed, err)
			}
			if d := cmp.Diff(decode(t, orig), decode(t, back)); d != "" {
				t.Errorf("remove did not give back the original (-want +got):\n%s", d)
			}
			if _, changed, _ := Remove(orig); changed {
				t.Error("remove changed a conflist without the plugin")
			}
		})
	}
}

// TestInsertMovesAndUpdates: a stale entry (old settings, not last, or twice) is replaced by
// one current entry at the end.
func TestInsertMovesAndUpdates(t *testing.T) {
	in := []byte(`{"cniVersion":"0.3.1","name":"cbr0","plugins":[
	  {"type":"bridge","mtu":1500},
	  {"type":"svclb-cni","agentSocket":"/old.sock"},
	  {"type":"portmap","capabilities":{"portMappings":true}},
	  {"type":"svclb-cni","agentSocket":"/old.sock"}]}`)
	out, changed, err := Insert(in, testEntry())
	if err != nil || !changed {
		t.Fatalf("insert: changed=%v err=%v", changed, err)
	}
	golden.Check(t, "testdata/stale.inserted.golden", out)
}

func TestInsertRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":         `{"cniVersion":`,
		"single .conf":     `{"cniVersion":"0.3.1","name":"cbr0","type":"bridge"}`,
		"plugins not list": `{"cniVersion":"0.3.1","name":"cbr0","plugins":{}}`,
		"nothing to chain": `{"cniVersion":"0.3.1","name":"cbr0","plugins":[{"type":"svclb-cni"}]}`,
	} {
		if _, _, err := Insert([]byte(in), testEntry()); err == nil || !strings.Contains(err.Error(), "cniinstall") {
			t.Errorf("%s: want an error, got %v", name, err)
		}
	}
}
