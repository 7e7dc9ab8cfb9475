package specs

import (
	"slices"
	"strings"
	"testing"
)

// listOutput is e2e.test --list-tests as a -trimpath build prints it
// (test/e2e/framework/test_context.go, listTestInformation; the path as
// k8s-e2e.test v1.34.4 prints it), cut to a few
// specs.
const listOutput = `The following spec names can be used with 'ginkgo run --focus/skip':
    k8s.io/kubernetes@v1.34.4/test/e2e/network/service.go:4276: [sig-network] Services should support named targetPorts that resolve to different ports on different endpoints
    k8s.io/kubernetes@v1.34.4/test/e2e/network/service.go:740: [sig-network] Services should serve a basic endpoint from pods [Conformance]
    k8s.io/kubernetes@v1.34.4/test/e2e/network/service.go:1214: [sig-network] Services should work after restarting kube-proxy [Disruptive]
    k8s.io/kubernetes@v1.34.4/test/e2e/network/dns.go:50: [sig-network] DNS should provide DNS for the cluster [Conformance]
    k8s.io/kubernetes@v1.34.4/test/e2e/network/traffic_distribution.go:96: [sig-network] Traffic Distribution should route traffic to an endpoint in the same zone when using PreferClose

`

func TestParseListAndInFiles(t *testing.T) {
	listed, err := ParseList(strings.NewReader(listOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 5 || listed[1].Line != 740 || listed[1].File != "k8s.io/kubernetes@v1.34.4/test/e2e/network/service.go" {
		t.Fatalf("parsed %+v", listed)
	}
	got, err := InFiles(listed, ServiceFiles)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Services should serve a basic endpoint from pods [Conformance]",
		"Services should support named targetPorts that resolve to different ports on different endpoints",
		"Services should work after restarting kube-proxy [Disruptive]",
		"Traffic Distribution should route traffic to an endpoint in the same zone when using PreferClose",
	}
	if !slices.Equal(got, want) {
		t.Errorf("InFiles = %q, want %q", got, want)
	}
}

func TestInFilesRefusesWhatWouldNotMatch(t *testing.T) {
	for name, out := range map[string]string{
		"a file without specs": "    k8s.io/kubernetes@v1.34.4/test/e2e/network/service.go:1: [sig-network] Services x\n",
		"another container":    "    k8s.io/kubernetes@v1.34.4/test/e2e/network/service.go:1: [sig-apps] Services x\n    k8s.io/kubernetes@v1.34.4/test/e2e/network/traffic_distribution.go:2: [sig-network] Traffic Distribution y\n",
	} {
		listed, err := ParseList(strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := InFiles(listed, ServiceFiles); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ParseList(strings.NewReader("nothing listed\n")); err == nil {
		t.Error("empty listing: no error")
	}
}

func TestPlanRunsSerialSpecsAloneAndSkipsFeatures(t *testing.T) {
	set := []string{
		"Services should a",
		"Services should b [Serial]",
		"Services should c [Disruptive]",
		"Services should d [Feature:LoadBalancer]",
		"Services should e",
		"Services should f [Flaky]",
	}
	parallel, serial := Plan(set, 5)
	var side []string
	for _, sh := range parallel {
		side = append(side, sh...)
	}
	slices.Sort(side)
	if !slices.Equal(side, []string{"Services should a", "Services should e"}) {
		t.Errorf("parallel %q", parallel)
	}
	if !slices.Equal(serial, []string{"Services should b [Serial]", "Services should c [Disruptive]"}) {
		t.Errorf("serial %q", serial)
	}
	for _, s := range []string{set[3], set[5]} {
		row := Judge(s, map[string]Result{PhaseGreen: {State: Absent}})
		if row.Verdict != SkippedVerdict || !strings.HasPrefix(row.Note, "not run on kind: upstream") {
			t.Errorf("%s: %+v", s, row)
		}
	}
}

func TestJudgeWithTheBaseline(t *testing.T) {
	const spec = "Services should x"
	failed := Result{Name: Prefix + spec, State: Failed}
	passed := Result{Name: Prefix + spec, State: Passed}
	for _, c := range []struct {
		name string
		runs map[string]Result
		want string
	}{
		{"kube-proxy passes, green fails: ours", map[string]Result{PhaseKubeProxy: passed, PhaseGreen: failed}, Fail},
		{"both fail: the cluster's", map[string]Result{PhaseKubeProxy: failed, PhaseGreen: failed}, BaselineFail},
		{"no baseline: ours", map[string]Result{PhaseGreen: failed}, Fail},
		{"green passes", map[string]Result{PhaseKubeProxy: failed, PhaseGreen: passed}, Pass},
	} {
		if got := Judge(spec, c.runs).Verdict; got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// A deviation keyed by the core set's short name holds for the full name.
	if row := Judge("Services should have session affinity timeout work for service with type clusterIP [LinuxOnly] [Conformance]", map[string]Result{PhaseGreen: {Name: "x", State: Failed}}); row.Verdict != ExpectedDeviation {
		t.Errorf("full name of a declared deviation: %+v", row)
	}
	row := Judge("Services should be able to create a functioning NodePort service", map[string]Result{PhaseRed: passed, PhaseGreen: passed})
	if !strings.Contains(row.Note, "NodePort traffic is kube-proxy's") {
		t.Errorf("red pass reason: %q", row.Note)
	}
}
