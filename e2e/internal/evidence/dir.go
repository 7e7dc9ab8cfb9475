package evidence

import "github.com/aether-mesh/svclb/fixtures/evidence"

// Dir is fixtures/evidence.Dir, for the CLI's phases.tsv lines.
type Dir = evidence.Dir
