package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/aether-mesh/svclb/fixtures/evidence"
)

// Load reads the evidence directory dir and Ginkgo's JSON report at
// ginkgoJSON (absent is fine: the suite may not have started).
func Load(dir, ginkgoJSON string) (Input, error) {
	set, err := evidence.Dir(dir).Load()
	if err != nil {
		return Input{}, fmt.Errorf("load evidence %s: %w", dir, err)
	}
	in := Input{Evidence: set}
	b, err := os.ReadFile(ginkgoJSON)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Input{}, fmt.Errorf("read ginkgo report: %w", err)
	default:
		if err := json.Unmarshal(b, &in.Ginkgo); err != nil {
			return Input{}, fmt.Errorf("decode ginkgo report %s: %w", ginkgoJSON, err)
		}
	}
	return in, nil
}

// WriteFiles writes report.md and report.html into dir.
func WriteFiles(dir string, r Report) error { return page.WriteFiles(dir, r) }
