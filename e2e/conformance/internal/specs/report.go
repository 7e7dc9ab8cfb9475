package specs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Phases, in report order. kube-proxy is the baseline: no enrollment, no cut,
// upstream's specs against plain kube-proxy.
const (
	PhaseKubeProxy = "kube-proxy"
	PhaseRed       = "red"
	PhaseGreen     = "green"
)

// AllPhases is every phase in report order.
var AllPhases = []string{PhaseKubeProxy, PhaseRed, PhaseGreen}

// PhaseRun is what the runner records of one phase, in <dir>/<phase>/phase.json.
type PhaseRun struct {
	Phase    string    `json:"phase"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	ExitCode int       `json:"exitCode"`
	// Setup says how the cluster was set up for it (proxy, enrollment, cut).
	Setup string `json:"setup"`
	// Focus is the --ginkgo.focus regex the phase ran (of each shard).
	Focus []string `json:"focus"`
	// Shards is how many e2e.test processes ran the phase.
	Shards int `json:"shards"`
	// Enrolled: the e2e framework's namespaces were to be enrolled (red,
	// green). Namespaces counts those seen; NotEnrolled names those the
	// selector missed, which makes the phase's verdicts void.
	Enrolled    bool     `json:"enrolled,omitempty"`
	Namespaces  int      `json:"namespaces,omitempty"`
	NotEnrolled []string `json:"notEnrolled,omitempty"`
}

// JUnitFiles are the reports e2e.test wrote for phase: --report-dir is
// <dir>/<phase> for one process, <dir>/<phase>/shard-<i> for each of several.
func JUnitFiles(dir, phase string) []string {
	one, _ := filepath.Glob(filepath.Join(dir, phase, "junit_*.xml"))
	shards, _ := filepath.Glob(filepath.Join(dir, phase, "shard-*", "junit_*.xml"))
	return append(one, shards...)
}

// readPhase merges the results of a phase's reports; a shard without one
// is an error (the others still count).
func readPhase(dir, phase string, shards int) (map[string]Result, error) {
	files := JUnitFiles(dir, phase)
	out := map[string]Result{}
	var errs []error
	if want := max(shards, 1); len(files) < want {
		errs = append(errs, fmt.Errorf("%d of %d JUnit reports", len(files), want))
	}
	for _, f := range files {
		res, err := ReadJUnit(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for name, r := range res {
			// Each shard lists every spec, those its focus left out as not
			// run: the shard that ran a spec (or skipped it, saying why) wins.
			if old, ok := out[name]; ok && r.State == NotReached && old.State != NotReached {
				continue
			}
			out[name] = r
		}
	}
	return out, errors.Join(errs...)
}

// WritePhase records run in dir/<phase>/phase.json.
func WritePhase(dir string, run PhaseRun) error {
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, run.Phase, "phase.json"), append(b, '\n'), 0o644)
}

// Report is peer.json: every phase found in the artifacts and one row per
// spec of the set.
type Report struct {
	Phases []PhaseRun     `json:"phases"`
	Rows   []Row          `json:"rows"`
	Counts map[string]int `json:"counts"`
	Docs   string         `json:"docs"`
	Errors []string       `json:"errors,omitempty"`
}

// Build reads every phase under dir (a phase.json and its JUnit file) and
// judges each spec of set.
func Build(dir string, set []string) (*Report, error) {
	rep := &Report{Counts: map[string]int{}, Docs: "docs/peer.md"}
	results := map[string]map[string]Result{}
	for _, ph := range AllPhases {
		b, err := os.ReadFile(filepath.Join(dir, ph, "phase.json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		var run PhaseRun
		if err := json.Unmarshal(b, &run); err != nil {
			return nil, fmt.Errorf("%s/phase.json: %w", ph, err)
		}
		rep.Phases = append(rep.Phases, run)
		res, err := readPhase(dir, ph, run.Shards)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v (exit %d)", ph, err, run.ExitCode))
		}
		if len(run.NotEnrolled) > 0 {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: namespaces not enrolled, their specs ran on plain kube-proxy: %s", ph, strings.Join(run.NotEnrolled, ", ")))
		}
		results[ph] = res
	}
	for _, spec := range set {
		runs := map[string]Result{}
		for ph, res := range results {
			runs[ph] = Find(res, spec)
		}
		row := Judge(spec, runs)
		rep.Rows = append(rep.Rows, row)
		rep.Counts[row.Verdict]++
	}
	return rep, nil
}

// Failed says whether the report holds a FAIL or a spec not run.
func (r *Report) Failed() bool {
	return r.Counts[Fail] > 0 || r.Counts[NotRun] > 0 || len(r.Errors) > 0
}

// Write writes peer.json, report.md and report.html into dir. docsLink is the path of
// docs/peer.md as seen from dir (the rows link their deviation's reason).
func (r *Report) Write(dir, docsLink string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "peer.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return page.WriteFiles(dir, r.View(docsLink))
}
