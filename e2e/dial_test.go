package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

// dialOpts say how a client probes.
type dialOpts struct {
	count    int
	interval time.Duration
	timeout  time.Duration
}

var quick = dialOpts{count: 10, interval: 50 * time.Millisecond, timeout: 2 * time.Second}

// dial runs `svclb-echo dial` in a meshed client pod: the connections leave
// the pod's own netns, so they take the capture path like an app's would.
func dial(ctx context.Context, client *corev1.Pod, to string, o dialOpts) ([]echo.Result, error) {
	out, _, err := suite.cluster.Exec(ctx, client.Namespace, client.Name, "app",
		"/svclb-echo", "dial", "-to="+to, "-count="+strconv.Itoa(o.count),
		"-interval="+o.interval.String(), "-timeout="+o.timeout.String())
	if err != nil {
		return nil, err
	}
	return parseDial(out)
}

// maxParallelDials bounds the concurrent execs of dialAll: each is a stream
// through the apiserver and the kubelet, on a small shared machine.
const maxParallelDials = 16

// dialJob is one `svclb-echo dial` exec.
type dialJob struct {
	client *corev1.Pod
	to     string
	o      dialOpts
}

// dialAll runs the jobs, at most parallel (capped at maxParallelDials) at a
// time, and returns their results in job order: a probe whose attempts each
// wait for a timeout then costs about one timeout instead of their sum.
func dialAll(ctx context.Context, jobs []dialJob, parallel int) ([][]echo.Result, error) {
	out := make([][]echo.Result, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, max(1, min(parallel, maxParallelDials)))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = dial(ctx, j.client, j.to, j.o)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseDial(out string) ([]echo.Result, error) {
	var rs []echo.Result
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r echo.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("dial output %q: %w", line, err)
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}

// backendKey names a backend in distributions: pod@node/zone.
func backendKey(r *echo.Reply) string {
	zone := r.Zone
	if zone == "" {
		zone = zoneOf(r.Node)
	}
	return fmt.Sprintf("%s@%s/%s", r.Pod, r.Node, zone)
}

func zoneOf(node string) string {
	for _, n := range suite.nodes {
		if n.Name == node {
			return n.Zone
		}
	}
	return ""
}

// outcome names a result for timelines.
func outcome(r echo.Result) string {
	switch {
	case r.OK:
		return "reply"
	case r.Err == echo.ErrRefused:
		return "host-refused"
	case r.Err == echo.ErrEOF || r.Err == echo.ErrReset:
		return "proxy-closed"
	case r.Err == echo.ErrTimeout:
		return "timeout"
	}
	return "error"
}

// tally adds results to a run's counts and distribution.
func tally(run *evidence.Run, rs []echo.Result) {
	if run.Backends == nil {
		run.Backends = map[string]int{}
	}
	for _, r := range rs {
		run.Attempts++
		switch outcome(r) {
		case "reply":
			run.Replies++
			run.Backends[backendKey(r.Reply)]++
		case "host-refused":
			run.HostRefused++
		case "proxy-closed":
			run.ProxyClosed++
		case "timeout":
			run.Timeouts++
		default:
			run.OtherErrors++
		}
	}
}

func countsSummary(run *evidence.Run) string {
	s := fmt.Sprintf("%d/%d replies", run.Replies, run.Attempts)
	for _, c := range []struct {
		n    int
		what string
	}{{run.ProxyClosed, "proxy-closed"}, {run.HostRefused, "ECONNREFUSED"}, {run.Timeouts, "timeouts"}, {run.OtherErrors, "other errors"}} {
		if c.n > 0 {
			s += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return s
}
