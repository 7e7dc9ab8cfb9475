package soak

import (
	"fmt"
	"slices"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// targetedFails is the rule of a fault that hits one load target
// (w.Target) and removes some of its backends (w.Pods): a connection one of
// them answered may be cut by its shutdown; one closed before any backend
// answered is allowed only as a refusal an agent logged for it (matched by
// the client's own address, which the proxy logs) that refused accepts. A
// nil refused allows none: a ready backend always remained.
func targetedFails(r *Record, w Window, e echo.LoadEvent, refused func(Refusal) (bool, string)) (bool, string) {
	if e.Target != w.Target {
		return false, fmt.Sprintf("the %s fault hit %s, not %s", w.Kind, w.Target, e.Target)
	}
	if e.Pod != "" {
		if slices.Contains(w.Pods, e.Pod) {
			return true, "answered by " + e.Pod + ", which the fault removed, and cut by its shutdown"
		}
		return false, "answered by " + e.Pod + ", which the fault did not remove"
	}
	if refused == nil {
		return false, "closed before any backend answered while ready backends remained (a rolling restart keeps one: maxUnavailable 0)"
	}
	ref, ok := refusalOf(r, e)
	if !ok {
		return false, "closed before any backend answered, and no agent logged a refusal of this connection (" + e.Local + ")"
	}
	if ok, why := refused(ref); !ok {
		return false, why
	}
	return true, fmt.Sprintf("%s%s by the agent on %s (%s/%s, flag %s)", refusedPrefix, ref.Reason, ref.Node, ref.Namespace, ref.Service, ref.Flag)
}

// removedBackendCuts allows the cut of a long-lived connection to w.Target
// whose backend the fault removed.
func removedBackendCuts(w Window, e echo.LoadEvent) (bool, string) {
	switch {
	case e.Target != w.Target:
		return false, fmt.Sprintf("the %s fault hit %s, not %s", w.Kind, w.Target, e.Target)
	case slices.Contains(w.Pods, e.Pod):
		return true, "its backend " + e.Pod + " was removed by the fault"
	}
	return false, "its backend " + e.Pod + " was not one the fault removed"
}
