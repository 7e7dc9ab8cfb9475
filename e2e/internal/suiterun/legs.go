package suiterun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// ListVar is e2e's LegsListVar (legs_list_test.go): the test binary's switch for the dry run.
const ListVar = "SVCLB_LEGS_LIST"

// Leg is one entry of the suite's tree: a leg or a figure, its labels, and whether a label
// filter selects it.
type Leg struct {
	Name     string
	Labels   []string
	Selected bool
}

// ListLegs runs the suite binary's dry run (TestLegsList) under filter and reads the legs
// from its JSON report, in the order they run. No cluster is needed.
func ListLegs(ctx context.Context, suite, repo, filter string) ([]Leg, error) {
	dir, err := os.MkdirTemp("", "svclb-e2e-list-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	report := filepath.Join(dir, "ginkgo.json")
	cmd := exec.CommandContext(ctx, suite, "-test.run", "^TestLegsList$", "-test.count=1",
		"-ginkgo.label-filter="+filter, "-ginkgo.json-report="+report, "-ginkgo.no-color")
	cmd.Dir = filepath.Join(repo, "e2e")
	cmd.Env = append(os.Environ(), ListVar+"=1", "SVCLB_E2E=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the suite's dry run (label filter %q): %w\n%s", filter, err, lastLines(out.String(), 15))
	}
	b, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("the suite's dry run wrote no report: %w", err)
	}
	return ParseLegs(b)
}

// ParseLegs reads the legs from a dry run's Ginkgo JSON report: one entry per top-level
// container (a leg's "leg <name>", labelled leg and its name; a figure, labelled by its
// name), selected when any of its specs would run.
func ParseLegs(ginkgoJSON []byte) ([]Leg, error) {
	var reports []types.Report
	if err := json.Unmarshal(ginkgoJSON, &reports); err != nil {
		return nil, fmt.Errorf("decode the dry run's report: %w", err)
	}
	var out []Leg
	index := map[string]int{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt || len(s.ContainerHierarchyTexts) == 0 {
				continue
			}
			var labels []string
			for _, ls := range s.ContainerHierarchyLabels {
				labels = append(labels, ls...)
			}
			labels = append(labels, s.LeafNodeLabels...)
			name := legName(s.ContainerHierarchyTexts[0], labels)
			i, ok := index[name]
			if !ok {
				i = len(out)
				index[name] = i
				out = append(out, Leg{Name: name})
			}
			for _, l := range labels {
				if !slices.Contains(out[i].Labels, l) {
					out[i].Labels = append(out[i].Labels, l)
				}
			}
			if s.State == types.SpecStatePassed {
				out[i].Selected = true
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the dry run's report lists no spec")
	}
	return out, nil
}

// legName is a leg's name ("leg reach" → reach), else the container's first label that is
// not opt-in (a figure: programming, cni-latency), else its text.
func legName(container string, labels []string) string {
	if n, ok := strings.CutPrefix(container, "leg "); ok {
		return n
	}
	for _, l := range labels {
		if l != "opt-in" {
			return l
		}
	}
	return container
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
