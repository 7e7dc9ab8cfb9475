package enroll

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNamespaceViewRoundTrip: what the agent writes the plugin reads back, and a view over
// the bound is not written (the old one stays).
func TestNamespaceViewRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "namespaces.json")
	if _, err := ReadNamespaceView(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing view: want fs.ErrNotExist, got %v", err)
	}
	v := &NamespaceView{Version: NamespaceViewVersion, Selector: "team=a", Generation: 3, WrittenAt: time.Unix(1700000000, 0).UTC(),
		Enrolled: []string{"a", "both"}, NotEnrolled: []string{"b", "both"}}
	if err := WriteNamespaceView(path, v); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNamespaceView(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(v, got); d != "" {
		t.Errorf("read back (-wrote +read):\n%s", d)
	}
	for ns, want := range map[string][2]bool{"a": {true, true}, "b": {false, true}, "both": {true, true}, "c": {false, false}} {
		if e, k := got.Lookup(ns); e != want[0] || k != want[1] {
			t.Errorf("Lookup(%s) = enrolled %v known %v, want %v", ns, e, k, want)
		}
	}

	huge := &NamespaceView{Version: NamespaceViewVersion}
	for i := 0; len(huge.NotEnrolled)*64 < MaxNamespaceViewBytes; i++ {
		huge.NotEnrolled = append(huge.NotEnrolled, strings.Repeat("n", 55)+string(rune('a'+i%26))+time.Duration(i).String())
	}
	if err := WriteNamespaceView(path, huge); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a view over the bound: want refused, got %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `"team=a"`) {
		t.Errorf("the old view after a refused write: %q %v", b, err)
	}
}
