package uninstall

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/golden"
)

// TestInspect reads captured rulesets (testdata/*.nft) and compares the findings with their
// golden files (go test -update rewrites them): a run's cuts and the guard's table are found,
// kube-proxy's own table is clean, a node without it is not.
func TestInspect(t *testing.T) {
	for _, c := range []struct {
		name  string
		clean bool
	}{{"cut", false}, {"clean", true}, {"no-kube-proxy", false}} {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", c.name+".nft"))
			if err != nil {
				t.Fatal(err)
			}
			f := Inspect(string(b))
			if f.Clean() != c.clean {
				t.Errorf("Clean() = %v, want %v: %s", f.Clean(), c.clean, f)
			}
			var out strings.Builder
			fmt.Fprintf(&out, "%s\nclean: %v\n", f, f.Clean())
			for _, x := range f.Cut {
				fmt.Fprintf(&out, "cut: %s\n", x)
			}
			golden.Check(t, filepath.Join("testdata", c.name+".golden"), []byte(out.String()))
		})
	}
}
