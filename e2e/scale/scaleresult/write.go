package scaleresult

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// writeResult writes v as indented JSON to dir/file, the perf results directory's way (one
// file per measurement, rewritten whole, so a run cut short keeps what it finished).
func writeResult(dir, file string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
