package specs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Listed is one spec as e2e.test --list-tests prints it: where its It is and
// its full text.
type Listed struct {
	File string
	Line int
	// Text is Ginkgo's full text ("[sig-network] Services should ...").
	Text string
}

// ServiceFiles are the files of test/e2e that state what kube-proxy does for
// a Service: every spec in them is the services set.
var ServiceFiles = []string{"test/e2e/network/service.go", "test/e2e/network/traffic_distribution.go"}

// listLine is "    <file>:<line>: <full text>" (test/e2e/framework/test_context.go,
// listTestInformation). The file is a module path when e2e.test was built with
// -trimpath, else absolute or relative to the working directory.
var listLine = regexp.MustCompile(`^\s+(\S+\.go):(\d+): (.+)$`)

// ParseList reads e2e.test --list-tests output.
func ParseList(r io.Reader) ([]Listed, error) {
	var out []Listed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := listLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, fmt.Errorf("list-tests line %q: %w", sc.Text(), err)
		}
		out = append(out, Listed{File: m[1], Line: n, Text: m[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read list-tests: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("list-tests printed no spec")
	}
	return out, nil
}

// ListSpecs runs e2e.test --list-tests: it prints every spec and exits without
// a cluster.
func ListSpecs(ctx context.Context, e2eTest string) ([]Listed, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e2eTest, "--list-tests")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s --list-tests: %w: %s", e2eTest, err, strings.TrimSpace(stderr.String()))
	}
	return ParseList(&stdout)
}

// InFiles are the set entries (text after Prefix) of the specs listed in
// files, sorted, each once. A spec outside the sig-network container would
// not match the runner's focus: it is an error, as is a file with no spec (a
// Kubernetes bump that moved it).
func InFiles(listed []Listed, files []string) ([]string, error) {
	seen := map[string]bool{}
	perFile := map[string]int{}
	for _, l := range listed {
		for _, f := range files {
			if l.File != f && !strings.HasSuffix(l.File, "/"+f) {
				continue
			}
			name, ok := strings.CutPrefix(l.Text, Prefix)
			if !ok {
				return nil, fmt.Errorf("%s:%d: %q does not start with %q", l.File, l.Line, l.Text, Prefix)
			}
			seen[name] = true
			perFile[f]++
		}
	}
	for _, f := range files {
		if perFile[f] == 0 {
			return nil, fmt.Errorf("e2e.test lists no spec of %s", f)
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
