package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/fixtures/cluster"
)

// inDocker answers cluster.DockerProbe from a table: container → its address; absent: not
// a container of the local Docker engine.
func inDocker(m map[string]string) cluster.DockerProbe {
	return func(_ context.Context, name string) (bool, []string, error) {
		ip, ok := m[name]
		if !ok {
			return false, nil, fmt.Errorf("docker inspect %s: no such container", name)
		}
		return true, []string{ip}, nil
	}
}

// TestRunnable: the soak chooses its node access as the legs do (cluster.ChooseAccess), and
// on a cluster that does not allow a fault the schedule leaves it out and records each of its
// windows once as skipped, with one note saying why: the node loss where a node is not a
// container of the local Docker engine, the apiserver outage where nodes are read through
// the apiserver (daemonset).
func TestRunnable(t *testing.T) {
	nodes := []cluster.Node{{Name: "cp", ControlPlane: true, InternalIP: "172.18.0.2"},
		{Name: "w1", InternalIP: "172.18.0.3"}, {Name: "w2", InternalIP: "172.18.0.4"}}
	kind := map[string]string{"cp": "172.18.0.2", "w1": "172.18.0.3", "w2": "172.18.0.4"}
	const notDocker, throughAPI = "the nodes are not containers of the local Docker engine", "pods/exec through the apiserver"
	for _, tc := range []struct {
		name    string
		want    cluster.NodeAccess
		docker  map[string]string
		access  cluster.NodeAccess
		skipped map[string]string // fault → a substring of its note
	}{
		{name: "kind", docker: kind, access: cluster.NodeAccessDocker},
		{name: "kind, daemonset asked", want: cluster.NodeAccessDaemonSet, docker: kind, access: cluster.NodeAccessDaemonSet,
			skipped: map[string]string{KindAPIServer: throughAPI}},
		{name: "no node in docker", docker: map[string]string{}, access: cluster.NodeAccessDaemonSet,
			skipped: map[string]string{KindAPIServer: throughAPI, KindNodeLoss: notDocker + " (kind): node cp is not a container"}},
		{name: "one worker elsewhere", docker: map[string]string{"cp": "172.18.0.2", "w1": "172.18.0.3"}, access: cluster.NodeAccessDaemonSet,
			skipped: map[string]string{KindAPIServer: throughAPI, KindNodeLoss: "node w2 is not a container"}},
		{name: "same names, other addresses", docker: map[string]string{"cp": "10.0.0.2", "w1": "10.0.0.3", "w2": "10.0.0.4"}, access: cluster.NodeAccessDaemonSet,
			skipped: map[string]string{KindAPIServer: throughAPI, KindNodeLoss: "not the node's InternalIP 172.18.0.2"}},
		{name: "docker asked, no node in docker", want: cluster.NodeAccessDocker, docker: map[string]string{}, access: cluster.NodeAccessDocker,
			skipped: map[string]string{KindNodeLoss: notDocker}},
	} {
		c := &cluster.Cluster{Nodes: nodes}
		if mode, why := c.ChooseAccess(context.Background(), tc.want, inDocker(tc.docker)); mode != tc.access {
			t.Errorf("%s: node access %s (%s), want %s", tc.name, mode, why, tc.access)
		}
		r := &runner{c: c, cfg: Config{Settings: Settings{Faults: AllFaults}}, rec: &Record{}, log: kit.NewProgress("soak-test", time.Now(), "")}
		var wantRun []string
		for _, name := range AllFaults {
			if _, skip := tc.skipped[name]; !skip {
				wantRun = append(wantRun, name)
			}
		}
		if got := faultNames(r.runnable()); !slices.Equal(got, wantRun) {
			t.Errorf("%s: runs %v, want %v", tc.name, got, wantRun)
		}
		recorded := map[string]int{}
		for _, w := range r.rec.Windows {
			recorded[w.Kind]++
			why, ok := tc.skipped[w.Kind]
			switch {
			case !ok:
				t.Errorf("%s: window %q of %s recorded, which runs", tc.name, w.Name, w.Kind)
			case !w.Skipped || len(w.Notes) != 1 || !strings.HasPrefix(w.Notes[0], "skipped: ") || !strings.Contains(w.Notes[0], why):
				t.Errorf("%s: window %+v: want it skipped, one note with %q", tc.name, w, why)
			case !w.End.Equal(w.Start):
				t.Errorf("%s: skipped window %q lasts %s, want nothing", tc.name, w.Name, w.End.Sub(w.Start))
			}
		}
		for name := range tc.skipped {
			if f, _ := faultOf(name); recorded[name] != len(f.Windows(r.layout())) {
				t.Errorf("%s: %s: %d windows recorded, want each of its %d once", tc.name, name, recorded[name], len(f.Windows(r.layout())))
			}
		}
	}
}
