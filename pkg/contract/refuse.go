package contract

import "time"

// Refusing before accept (KeyRefusal=RefusalReset; internal/refuse, agent/refuser.go).
const (
	// RefuseCountEvery is how often the agent reads the refuse tables' per-element counters
	// into MetricSvcRefused (reasons ReasonNoEndpoints, ReasonPortNotDeclared); it also reads
	// them whenever an element or a table goes.
	RefuseCountEvery = 5 * time.Second
	// LogKeyCount is a refusal line's number of connections when one line stands for several:
	// the SYNs reset since the counters were last read.
	LogKeyCount = "count"
)
