package measure

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
)

// ProgrammedTimeout bounds WaitProgrammed. The agent pushes within its
// debounce (50 ms) of a change and the proxy applies a push in
// milliseconds; the bound is for a loaded machine and a DaemonSet pod
// that is restarting.
const ProgrammedTimeout = 90 * time.Second

// WaitProgrammed waits until every node's proxy serves what that node's
// agent emits now, read from the proxy's own admin API
// (/config_dump?include_eds, Envoy's shapes): every capture listener the
// agent's /status lists is active and sends the Service range the way the
// agent's reported Phase flags and CDS mode say (listenerProblem); and for
// each dialled Service, from the Service and its EndpointSlices as the
// apiserver has them now, its svc: clusters are absent with Phase 1 off,
// and otherwise active with the endpoints in the priorities and zones
// internal/translate gives for the node (in on-demand mode only the
// clusters the proxy holds are checked: it asks for the others). This is
// the signal that a Phase flip or an EndpointSlice change has taken effect
// where connections are made. It returns how long it waited.
func WaitProgrammed(ctx context.Context, c *cluster.Cluster, dialled []Dialled) (time.Duration, error) {
	t0 := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, ProgrammedTimeout, true, func(ctx context.Context) (bool, error) {
		why := notProgrammed(ctx, c, dialled)
		if ctx.Err() == nil || last == "" { // a read cut short by the deadline says nothing
			last = why
		}
		return why == "", nil
	})
	if err != nil {
		return time.Since(t0), fmt.Errorf("node proxies not programmed after %s: %s", time.Since(t0).Round(100*time.Millisecond), last)
	}
	return time.Since(t0), nil
}

// serviceState is a dialled Service and its EndpointSlices as read now.
type serviceState struct {
	svc    *corev1.Service
	slices []*discoveryv1.EndpointSlice
}

// notProgrammed says what some node's proxy does not serve yet ("" when
// every node's does).
func notProgrammed(ctx context.Context, c *cluster.Cluster, dialled []Dialled) string {
	sts, err := agent.Statuses(ctx, c)
	if err != nil {
		return err.Error()
	}
	var svcs []serviceState
	_, inside := split(dialled)
	for _, k := range serviceKeys(inside) {
		if k == "" {
			continue
		}
		ns, name, _ := strings.Cut(k, "/")
		svc, err := c.CS.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // created by the leg's measure (new-service): no cluster of it yet
		}
		if err != nil {
			return err.Error()
		}
		l, err := c.CS.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return err.Error()
		}
		s := serviceState{svc: svc}
		for i := range l.Items {
			s.slices = append(s.slices, &l.Items[i])
		}
		svcs = append(svcs, s)
	}
	why := map[string]string{}
	var mu sync.Mutex
	_ = concurrently(cluster.NodeNames(c.Nodes), func(n string) error {
		st, ok := sts[n]
		w := ""
		if !ok {
			w = "no agent /status"
		} else if d, err := proxy.ConfigDumpWithEndpoints(ctx, c, n); err != nil {
			w = err.Error()
		} else {
			w = programmedProblem(translate.Node{Name: n, Zone: c.Zone(n)}, st, d, svcs)
		}
		mu.Lock()
		why[n] = w
		mu.Unlock()
		return nil
	})
	var out []string
	for _, n := range cluster.NodeNames(c.Nodes) {
		if why[n] != "" {
			out = append(out, n+": "+why[n])
		}
	}
	return strings.Join(out, "; ")
}

// programmedProblem compares one node's proxy configuration d with what its
// agent (status st) emits for node and the Services svcs ("" when equal).
func programmedProblem(node translate.Node, st *agentstatus.Status, d *adminv3.ConfigDump, svcs []serviceState) string {
	ls, err := proxy.ActiveListeners(d)
	if err != nil {
		return err.Error()
	}
	settings := fmt.Sprintf("phase1=%v phase2=%v cds=%s", st.Phase1, st.Phase2, st.CDS)
	for _, l := range st.Listeners {
		got, ok := ls[l.Name]
		if !ok {
			return fmt.Sprintf("listener %s not active", l.Name)
		}
		if why := listenerProblem(got, st); why != "" {
			return fmt.Sprintf("listener %s: %s, want the agent's for %s", l.Name, why, settings)
		}
	}
	states, err := proxy.ClusterStates(d)
	if err != nil {
		return err.Error()
	}
	las, err := proxy.LoadAssignments(d)
	if err != nil {
		return err.Error()
	}
	for _, s := range svcs {
		clusters, loads, _ := translate.Service(s.svc, s.slices, node)
		for i, cl := range clusters {
			name, state := cl.GetName(), states[cl.GetName()]
			switch {
			case !st.Phase1:
				if state != "" {
					return fmt.Sprintf("cluster %s still %s with Phase 1 off", name, state)
				}
				continue
			case state == "" && st.CDS == agentstatus.CDSOnDemand:
				continue // not asked for yet: nothing to compare
			case state != proxy.ClusterActive:
				return fmt.Sprintf("cluster %s is %q, want active (%s)", name, orAbsent(string(state)), settings)
			}
			want, err := proxy.Bands(loads[i])
			if err != nil {
				return err.Error()
			}
			got := map[netip.AddrPort]proxy.Band{}
			if la, ok := las[name]; ok { // Envoy may leave a cluster without hosts out of the dump
				if got, err = proxy.Bands(la); err != nil {
					return err.Error()
				}
			}
			if !maps.Equal(got, want) {
				return fmt.Sprintf("cluster %s endpoints %v, want %v", name, got, want)
			}
		}
	}
	return ""
}

func orAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}
