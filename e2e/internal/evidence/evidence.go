package evidence

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Mode is which half of a leg a Run is.
type Mode string

const (
	// Red is the run with the agent's Phase flags off: today's behaviour.
	Red Mode = "red"
	// Green is the run with the Phase flags on.
	Green Mode = "green"
)

// Run is what one half of a leg observed.
type Run struct {
	Mode Mode `json:"mode"`
	// MetGreen says whether the observation satisfies the leg's green
	// condition. A red run with MetGreen=true proves nothing.
	MetGreen bool `json:"metGreen"`
	// MetRed says whether the observation matches the leg's red expectation.
	MetRed bool `json:"metRed"`
	// Summary is one line for the report table.
	Summary string `json:"summary"`
	// Error is set when the run could not observe at all (setup, timeout).
	Error    string        `json:"error,omitempty"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`

	Attempts int `json:"attempts"`
	Replies  int `json:"replies"`
	// ProxyClosed counts connections accepted and then closed or reset
	// without a reply: the node proxy's refusal.
	ProxyClosed int `json:"proxyClosed"`
	// HostRefused counts ECONNREFUSED: a REJECT on the host (kube-proxy's
	// cluster-ips-check), never the proxy.
	HostRefused int `json:"hostRefused"`
	Timeouts    int `json:"timeouts"`
	OtherErrors int `json:"otherErrors"`

	// Backends counts replies per backend pod ("pod@node/zone").
	Backends map[string]int `json:"backends,omitempty"`
	// Flows are the same attempts per client node and destination (Tally).
	Flows []Flow `json:"flows,omitempty"`
	// Counters holds metric deltas over the run, keyed by series.
	Counters map[string]float64 `json:"counters,omitempty"`
	// Checks are the counters the suite read on every node around the run
	// (the node proxy's stats, the agent's refusals, its refusal log) and
	// what red and green require of each (ApplyChecks).
	Checks []Check `json:"checks,omitempty"`
	// Cuts are, per cut Service the leg dials, kube-proxy's ClusterIP
	// entries of it on every node before and after the run (CutHeld).
	Cuts []Cut `json:"cuts,omitempty"`
	// Refusals are records of the agent's refusal log: one per refused
	// target the leg declares, the first the agent logged in the run.
	Refusals []Refusal `json:"refusals,omitempty"`
	// Timeline is the ordered record of a leg that changes state while it
	// measures (drain).
	Timeline []Sample `json:"timeline,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Sample is one connection of a timeline.
type Sample struct {
	At time.Duration `json:"at"` // since the run started
	// Stage names the state of the workload when the connection was made
	// (for drain: "2 ready", "1 ready + 1 terminating", "0 ready").
	Stage   string `json:"stage"`
	Backend string `json:"backend,omitempty"`
	// BackendState is what the backend was at that time: "ready", "terminating", "".
	BackendState string `json:"backendState,omitempty"`
	Outcome      string `json:"outcome"` // "reply", "proxy-closed", "host-refused", "timeout", "error"
}

// Verdict is the combined result of a leg.
type Verdict string

const (
	Pass          Verdict = "pass"
	ProvesNothing Verdict = "proves nothing" // green with the agent off
	RedUnexpected Verdict = "red unexpected" // red, but not the red the leg expects
	GreenFailed   Verdict = "green failed"
	Incomplete    Verdict = "incomplete" // a run is missing or could not observe
)

// Failed reports whether the verdict fails the suite.
func (v Verdict) Failed() bool { return v != Pass }

// Leg is one acceptance leg: its red and green runs and the verdict.
type Leg struct {
	Name string `json:"name"`
	// Setup, GreenMeans and RedExpect restate the leg for the report.
	Setup      string        `json:"setup"`
	GreenMeans string        `json:"greenMeans"`
	RedExpect  string        `json:"redExpect"`
	Red        *Run          `json:"red,omitempty"`
	Green      *Run          `json:"green,omitempty"`
	Verdict    Verdict       `json:"verdict"`
	Reason     string        `json:"reason"`
	Duration   time.Duration `json:"duration"`
	// Chance says what in the leg can fail by chance: the per-attempt
	// timeout and why, the false-failure odds of a statistical check.
	Chance string `json:"chance,omitempty"`
	// Dialled are the targets whose evidence the suite gathered (the leg's
	// declared Services and addresses).
	Dialled []string `json:"dialled,omitempty"`
}

// Judge combines the two runs. Order matters: a red run that looks green
// proves nothing whatever the green run says; a run during which
// kube-proxy restored a Service the leg needs cut observed another setup,
// so it is incomplete whatever it saw.
func Judge(red, green *Run) (Verdict, string) {
	if v, reason, ok := judgeCuts(red, green); !ok {
		return v, reason
	}
	switch {
	case red.MetGreen:
		return ProvesNothing, "green with the agent off: " + red.Summary + failing(red, Green)
	case !red.MetRed:
		return RedUnexpected, "red run did not show the expected failure: " + red.Summary + failing(red, Red)
	case green.Error != "":
		return GreenFailed, "green run: " + green.Error
	case !green.MetGreen:
		return GreenFailed, green.Summary + failing(green, Green)
	}
	return Pass, "red as expected, green as required"
}

// JudgeControl judges a control leg (passthrough): its red and green must
// both meet the green condition.
func JudgeControl(red, green *Run) (Verdict, string) {
	if v, reason, ok := judgeCuts(red, green); !ok {
		return v, reason
	}
	switch {
	case !red.MetGreen:
		return RedUnexpected, "control leg: red must already be unchanged traffic: " + red.Summary + failing(red, Green)
	case green.Error != "" || !green.MetGreen:
		return GreenFailed, green.Summary + green.Error + failing(green, Green)
	}
	return Pass, "control: unchanged with the agent off and on"
}

// judgeCuts is what both judgements check first: both runs there, the red
// one observed, and kube-proxy kept out of both. ok is false with the
// verdict when not.
func judgeCuts(red, green *Run) (Verdict, string, bool) {
	switch {
	case red == nil:
		return Incomplete, "no red run", false
	case red.Error != "":
		return Incomplete, "red run: " + red.Error, false
	}
	if held, why := red.CutHeld(); !held {
		return Incomplete, "red run: " + why, false
	}
	if green == nil {
		return Incomplete, "no green run", false
	}
	if held, why := green.CutHeld(); !held {
		return Incomplete, "green run: " + why, false
	}
	return "", "", true
}

// failing names the checks of r that the condition of mode rejects, for a
// verdict's reason ("" when none).
func failing(r *Run, mode Mode) string {
	fs := r.Failing(mode)
	if len(fs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(fs))
	for _, c := range fs {
		parts = append(parts, c.String(mode))
	}
	return "; " + string(mode) + " needs: " + strings.Join(parts, ", ")
}

// Env describes what the legs ran against.
type Env struct {
	Proxy             string    `json:"proxy"` // "envoy" or "builtin"
	ProxyChoice       string    `json:"proxyChoice,omitempty"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	KindVersion       string    `json:"kindVersion"`
	EnvoyVersion      string    `json:"envoyVersion"`
	KubeProxyMode     string    `json:"kubeProxyMode"`
	Nodes             []Node    `json:"nodes"`
	Started           time.Time `json:"started"`
}

// Node is one cluster node.
type Node struct {
	Name string `json:"name"`
	Zone string `json:"zone"`
	IP   string `json:"ip"`
}

// Programming compares network programming latency for the same
// EndpointSlice changes.
type Programming struct {
	Changes   int       `json:"changes"`
	Agent     Quantiles `json:"agent"`
	KubeProxy Quantiles `json:"kubeProxy"`
	Note      string    `json:"note,omitempty"`
}

// Quantiles are estimated from histogram bucket deltas (upper bounds, as
// Prometheus' histogram_quantile does without interpolation).
type Quantiles struct {
	Metric string  `json:"metric"`
	Count  float64 `json:"count"`
	P50    float64 `json:"p50Seconds"`
	P99    float64 `json:"p99Seconds"`
}

// CNILatency is the svclb-cni figure (e2e/cnilatency_test.go, opt-in):
// pod sandbox creation times, enrolled against not enrolled, from
// containerd's own RunPodSandbox log.
type CNILatency struct {
	PodsPerKind int     `json:"podsPerKind"`
	Enrolled    Spread  `json:"enrolled"`
	NotEnrolled Spread  `json:"notEnrolled"`
	AddedP50    float64 `json:"addedP50Ms"`
	Note        string  `json:"note,omitempty"`
	// Chance is what varies from run to run and how far the quantiles
	// can be trusted.
	Chance string `json:"chance,omitempty"`
}

// Spread is the sandbox durations of one kind of pod, in ms.
type Spread struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50Ms"`
	P99   float64 `json:"p99Ms"`
}

// Phase is the wall time of one step of the run.
type Phase struct {
	Name    string
	Seconds float64
}

// Dir is an evidence directory.
type Dir string

func (d Dir) writeJSON(name string, v any) error {
	p := filepath.Join(string(d), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("evidence dir: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	// Write then rename so a reader never sees half a file.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return os.Rename(tmp, p)
}

func (d Dir) readJSON(name string, v any) error {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", name, err)
	}
	return nil
}

// WriteLeg records a leg (legs/<name>.json).
func (d Dir) WriteLeg(l *Leg) error { return d.writeJSON(filepath.Join("legs", l.Name+".json"), l) }

// WriteEnv records the environment.
func (d Dir) WriteEnv(e *Env) error { return d.writeJSON("env.json", e) }

// WriteProgramming records the programming-latency comparison.
func (d Dir) WriteProgramming(p *Programming) error { return d.writeJSON("programming.json", p) }

// WriteCNILatency records the svclb-cni figure.
func (d Dir) WriteCNILatency(c *CNILatency) error { return d.writeJSON("cni-latency.json", c) }

// AddPhase appends one phase duration to phases.tsv.
func (d Dir) AddPhase(name string, dur time.Duration) error {
	if strings.ContainsAny(name, "\t\n") {
		return fmt.Errorf("phase name %q: tabs and newlines are not allowed", name)
	}
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("evidence dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(string(d), "phases.tsv"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("phases.tsv: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%s\t%.1f\n", name, dur.Seconds())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// Set is everything an evidence directory holds. Missing files leave their
// field empty: a run that failed in setup still gets a report.
type Set struct {
	Env *Env
	// Order is the run's order of the legs (order.json, WriteOrder); nil
	// for evidence older than that record.
	Order       []string
	Legs        []*Leg // in Order, then by name (ByOrder)
	Phases      []Phase
	Programming *Programming
	CNILatency  *CNILatency
	// Failure is a failure outside the legs (failure.txt), e.g. suite setup.
	Failure string
}

// LegLabel is the Ginkgo label every leg's container carries besides the
// leg's name: the report tells legs from other specs by it.
const LegLabel = "leg"

// OptInLabel marks a spec that a run without LEGS leaves out (e2e/run.sh's
// default filter is !opt-in): the cni-latency figure, which starts 100 pods.
const OptInLabel = "opt-in"

// Load reads an evidence directory.
func (d Dir) Load() (*Set, error) {
	s := &Set{}
	var env Env
	switch err := d.readJSON("env.json", &env); {
	case err == nil:
		s.Env = &env
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	var prog Programming
	switch err := d.readJSON("programming.json", &prog); {
	case err == nil:
		s.Programming = &prog
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	var cni CNILatency
	switch err := d.readJSON("cni-latency.json", &cni); {
	case err == nil:
		s.CNILatency = &cni
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(string(d), "legs", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		var l Leg
		if err := d.readJSON(filepath.Join("legs", filepath.Base(f)), &l); err != nil {
			return nil, err
		}
		s.Legs = append(s.Legs, &l)
	}
	if s.Order, err = d.loadOrder(); err != nil {
		return nil, err
	}
	byOrder := ByOrder(s.Order)
	slices.SortStableFunc(s.Legs, func(a, b *Leg) int { return byOrder(a.Name, b.Name) })
	switch b, err := os.ReadFile(filepath.Join(string(d), "failure.txt")); {
	case err == nil:
		s.Failure = strings.TrimSpace(string(b))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	phases, err := d.loadPhases()
	if err != nil {
		return nil, err
	}
	s.Phases = phases
	return s, nil
}

func (d Dir) loadPhases() ([]Phase, error) {
	f, err := os.Open(filepath.Join(string(d), "phases.tsv"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Phase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secs, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("phases.tsv:%d: want <name>TAB<seconds>, got %q", n, line)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(secs), 64)
		if err != nil {
			return nil, fmt.Errorf("phases.tsv:%d: %w", n, err)
		}
		out = append(out, Phase{Name: name, Seconds: v})
	}
	return out, sc.Err()
}

// WriteFailure records a failure outside the legs (suite setup); the report
// states it and fails the run.
func (d Dir) WriteFailure(msg string) error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("evidence dir: %w", err)
	}
	return os.WriteFile(filepath.Join(string(d), "failure.txt"), []byte(msg+"\n"), 0o644)
}
