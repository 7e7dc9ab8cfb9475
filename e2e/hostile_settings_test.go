package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/evidence"
	"github.com/aether-mesh/svclb/fixtures/leg"
	"github.com/aether-mesh/svclb/fixtures/proxy"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const (
	// hostileSettingsValue is what a careless operator types for "false".
	hostileSettingsValue = "off"
	// hostileSettingsWithin bounds how long every agent may take to report it.
	hostileSettingsWithin = time.Minute
)

// hostile-settings: `phase1: off` is not a value the agent accepts ("true" or "false"), so it
// changes nothing: every agent keeps the Phase it had and names the value it refused, and
// every capture listener keeps sending the Service range where it did. Before, a value that
// did not parse fell back to the flag default, on.
var _ = leg.Define(legs, leg.Leg[netip.Addr]{
	Name:      "hostile-settings",
	Control:   true,
	Workloads: "none: the agent ConfigMap's phase1 key, set to \"off\" for the run and back to the run's value after it",
	Exercises: "agent/settings.go (parseSettings: exact values, the last good value kept), agent/status.go (settingsErrors)",
	Setup: fmt.Sprintf("the agent ConfigMap's %s set to %q, then back to the run's value; every node's agent /status and proxy config_dump read before and after",
		contract.KeyPhase1, hostileSettingsValue),
	RedExpect: "same as green (control leg): the bad value changes nothing whatever the Phase flags",
	GreenMeans: fmt.Sprintf("every agent keeps the %s it had and lists %s in settingsErrors with the value %q; every node's capture listeners send the Service range to the chain they did before; with the run's value back, no agent lists a settings error",
		contract.KeyPhase1, contract.KeyPhase1, hostileSettingsValue),
	Chance: fmt.Sprintf("nothing statistical: every agent must report within %s", hostileSettingsWithin),
	// Any address in the Service range: kube-dns' ClusterIP.
	Prepare: func(ctx context.Context) (netip.Addr, error) {
		kd, err := suite.cluster.CS.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			return netip.Addr{}, fmt.Errorf("get Service kube-system/kube-dns: %w", err)
		}
		a, err := netip.ParseAddr(kd.Spec.ClusterIP)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("kube-dns ClusterIP %q: %w", kd.Spec.ClusterIP, err)
		}
		return a, nil
	},
	Measure: measureHostileSettings,
})

// rangeChains is the chain every capture listener on every node gives inRange, "node/listener"
// → chain.
func rangeChains(ctx context.Context, inRange netip.Addr) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range suite.cluster.Nodes {
		d, err := proxy.ConfigDump(ctx, suite.cluster, n.Name)
		if err != nil {
			return nil, err
		}
		ls, err := proxy.ActiveListeners(d)
		if err != nil {
			return nil, err
		}
		for name, l := range ls {
			if !strings.HasPrefix(name, contract.ListenerPrefix) {
				continue
			}
			chain, err := proxy.ChainFor(l, inRange)
			if err != nil {
				return nil, err
			}
			out[n.Name+"/"+name] = chain
		}
	}
	return out, nil
}

func phase1Error(s *agentstatus.Status) (agentstatus.SettingError, bool) {
	i := slices.IndexFunc(s.SettingsErrors, func(e agentstatus.SettingError) bool { return e.Key == contract.KeyPhase1 })
	if i < 0 {
		return agentstatus.SettingError{}, false
	}
	return s.SettingsErrors[i], true
}

// waitAgents polls until every node's agent status meets ok, and returns those statuses by node,
// or the last status that did not.
func waitAgents(ctx context.Context, ok func(*agentstatus.Status) bool) (map[string]*agentstatus.Status, string, error) {
	var got map[string]*agentstatus.Status
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, hostileSettingsWithin, true, func(ctx context.Context) (bool, error) {
		st, err := agent.Statuses(ctx, suite.cluster)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for node, s := range st {
			if !ok(s) {
				last = fmt.Sprintf("agent on %s: settingsErrors %+v", node, s.SettingsErrors)
				return false, nil
			}
		}
		got = st
		return len(st) == len(suite.cluster.Nodes), nil
	})
	return got, last, err
}

func measureHostileSettings(ctx context.Context, inRange netip.Addr, run *evidence.Run) {
	before, err := agent.Statuses(ctx, suite.cluster)
	if err != nil {
		run.Error = err.Error()
		return
	}
	chainsBefore, err := rangeChains(ctx, inRange)
	if err != nil {
		run.Error = err.Error()
		return
	}
	var phase1 *bool
	for node, s := range before {
		if phase1 != nil && *phase1 != s.Phase1 {
			run.Error = fmt.Sprintf("agents disagree on phase1 before the run (%s: %v)", node, s.Phase1)
			return
		}
		phase1 = &s.Phase1
	}
	if phase1 == nil {
		run.Error = "no agent status"
		return
	}
	good := strconv.FormatBool(*phase1)
	if err := agent.WriteConfig(ctx, suite.cluster, map[string]string{contract.KeyPhase1: hostileSettingsValue}); err != nil {
		run.Error = err.Error()
		return
	}
	restored := false
	defer func() {
		if !restored { // the legs after this one must find the run's value
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := agent.WriteConfig(cctx, suite.cluster, map[string]string{contract.KeyPhase1: good}); err != nil {
				run.Notes = append(run.Notes, "restore after a failure: "+err.Error())
			}
		}
	}()

	// Every agent has read the bad value once it names it.
	quoted := strconv.Quote(hostileSettingsValue)
	during, last, err := waitAgents(ctx, func(s *agentstatus.Status) bool {
		e, ok := phase1Error(s)
		return ok && e.Value == quoted
	})
	if err != nil {
		run.Error = fmt.Sprintf("not every agent reported %s=%q within %s: %v (last: %s)", contract.KeyPhase1, hostileSettingsValue, hostileSettingsWithin, err, last)
		return
	}
	// A flip, had one happened, is programmed at once; the listeners must be what they were.
	chainsDuring, err := rangeChains(ctx, inRange)
	if err != nil {
		run.Error = err.Error()
		return
	}
	var flipped, moved []string
	for node, s := range during {
		e, _ := phase1Error(s)
		if s.Phase1 != *phase1 || e.Kept != good {
			flipped = append(flipped, fmt.Sprintf("%s: phase1 %v (kept %q)", node, s.Phase1, e.Kept))
		}
	}
	for k, c := range chainsBefore {
		if chainsDuring[k] != c {
			moved = append(moved, fmt.Sprintf("%s: %s → %s", k, c, chainsDuring[k]))
		}
	}

	if err := agent.WriteConfig(ctx, suite.cluster, map[string]string{contract.KeyPhase1: good}); err != nil {
		run.Error = err.Error()
		return
	}
	restored = true
	_, last, err = waitAgents(ctx, func(s *agentstatus.Status) bool { return len(s.SettingsErrors) == 0 })
	cleared := err == nil

	run.MetGreen = len(flipped) == 0 && len(moved) == 0 && len(chainsBefore) > 0 && cleared
	run.MetRed = run.MetGreen
	run.Summary = fmt.Sprintf("%s=%q on %d agents: phase1 kept %s on %d, flipped on %d; %d capture listeners' range chain unchanged, %d moved; settings errors cleared with %s back: %v",
		contract.KeyPhase1, hostileSettingsValue, len(during), good, len(during)-len(flipped), len(flipped), len(chainsBefore)-len(moved), len(moved), good, cleared)
	if len(flipped) > 0 {
		run.Notes = append(run.Notes, "flipped: "+strings.Join(flipped, "; "))
	}
	if len(moved) > 0 {
		run.Notes = append(run.Notes, "moved: "+strings.Join(moved, "; "))
	}
	if !cleared {
		run.Notes = append(run.Notes, "still reported: "+last)
	}
}
