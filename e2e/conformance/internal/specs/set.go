package specs

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Prefix is the container text of every spec of the set (common.SIGDescribe).
const Prefix = "[sig-network] "

// Named sets (the runner's -set, make e2e-peer PEER_SET).
const (
	// SetCore is e2e/conformance/focus.txt: the specs picked for the agent,
	// CI-sized.
	SetCore = "core"
	// SetServices is every spec of ServiceFiles, listed by e2e.test.
	SetServices = "services"
)

// SavedSetFile is where a run keeps its set in the artifacts directory, so a
// report rebuilt later judges the same specs.
const SavedSetFile = "set.txt"

// SaveSet writes names in ReadSet's format, headed by the set's name.
func SaveSet(path, set string, names []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# set %s: %d specs\n", set, len(names))
	for _, n := range names {
		b.WriteString(n + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("save the set: %w", err)
	}
	return nil
}

// ReadSet reads the set's spec names (e2e/conformance/focus.txt): one per
// line, the text after Prefix; blank lines and lines starting with # are left
// out.
func ReadSet(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the set: %w", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		names = append(names, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the set %s: %w", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("the set %s names no spec", path)
	}
	return names, nil
}

// Focus is the --ginkgo.focus regex that selects exactly names.
func Focus(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return regexp.QuoteMeta(Prefix) + "(" + strings.Join(q, "|") + ")"
}

// Matches says whether Ginkgo's full text of a spec is set entry name: the
// entry, then the end or the labels Ginkgo appends (" [Conformance]"). An
// entry may end in a space (upstream's "… adding or deleting ports "): the
// JUnit report trims the text, --list-tests does not.
func Matches(fullText, name string) bool {
	rest, ok := strings.CutPrefix(fullText, Prefix+strings.TrimRight(name, " "))
	return ok && (rest == "" || strings.HasPrefix(rest, " "))
}

// Find is the result of set entry name in a run's results (Absent when the
// run has none).
func Find(results map[string]Result, name string) Result {
	for full, r := range results {
		if Matches(full, name) {
			return r
		}
	}
	return Result{Name: Prefix + name, State: Absent}
}

// lookup finds spec in m: a key equal to it, or one it extends by labels
// Ginkgo appends (" [Conformance]"), so maps keyed by the core set's short
// names also serve the services set's full names.
func lookup[T any](m map[string]T, spec string) (T, bool) {
	if v, ok := m[spec]; ok {
		return v, true
	}
	for k, v := range m {
		if Matches(Prefix+spec, k) {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// Alone are the set's specs that run in a share of their own, with why.
var Alone = map[string]string{
	// execAffinityTestForSessionAffinityTimeout: 10 tries 125+5 s apart.
	"Services should have session affinity timeout work for service with type clusterIP [LinuxOnly]": "when it fails it takes 10 × 130 s, longer than any phase",
}

// Plan splits the set for a phase: the specs that run side by side, dealt
// into at most n shares (Shares); those that run one at a time after them
// (Serial); and those that do not run at all (NotRunnable, judged SKIPPED).
func Plan(set []string, n int) (parallel [][]string, serial []string) {
	var side []string
	for _, name := range set {
		switch _, skip := NotRunnable(name); {
		case skip:
		case Serial(name):
			serial = append(serial, name)
		default:
			side = append(side, name)
		}
	}
	return Shares(side, n), serial
}

// Shares deals the set into n shares, one per e2e.test process: each Alone
// spec in a share of its own, the rest round-robin over the others. A set
// smaller than n gets fewer.
func Shares(set []string, n int) [][]string {
	var alone, rest []string
	for _, name := range set {
		if _, ok := lookup(Alone, name); ok {
			alone = append(alone, name)
		} else {
			rest = append(rest, name)
		}
	}
	var out [][]string
	for _, name := range alone {
		out = append(out, []string{name})
	}
	m := max(1, min(n-len(out), len(rest)))
	if len(rest) == 0 {
		return out
	}
	shares := make([][]string, m)
	for i, name := range rest {
		shares[i%m] = append(shares[i%m], name)
	}
	return append(out, shares...)
}
