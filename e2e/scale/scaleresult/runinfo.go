package scaleresult

import "time"

// RunInfo is what every result of this package says of its run, embedded (its fields are
// the result's own in JSON): when, how long, how loaded the machine was, and where it broke.
type RunInfo struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute averages around the
	// run (the machine may be shared); CPUs is how many it has.
	LoadBefore [3]float64 `json:"loadBefore"`
	LoadAfter  [3]float64 `json:"loadAfter"`
	CPUs       int        `json:"cpus"`
	Notes      []string   `json:"notes,omitempty"`
	// Broke says where the run stopped when a step did not finish.
	Broke string `json:"broke,omitempty"`
}
