package soak

import (
	"context"
	"fmt"
	"slices"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// registry is every fault, in schedule order: SOAK_FAULTS=all runs them
// all, one after the other, and a list of names runs those in this order.
var registry = []Fault{
	rollingRestart{},
	scaleToZero{},
	kubeProxyRestart{},
	agentRestart{},
	proxyRestart{},
	apiserverOutage{},
	serviceRecreate{},
	rangeScan{},
	firstConnections{},
	nodeLoss{},
}

// AllFaults are the registered faults' names, in schedule order.
var AllFaults = faultNames(registry)

func faultNames(fs []Fault) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name()
	}
	return out
}

// faultOf is the registered fault of kind.
func faultOf(kind string) (Fault, bool) {
	i := slices.IndexFunc(registry, func(f Fault) bool { return f.Name() == kind })
	if i < 0 {
		return nil, false
	}
	return registry[i], true
}

// unknown stands in for a window of a kind no fault registers (a record
// written by another version): it allows nothing.
type unknown struct{ kind string }

func (u unknown) Name() string            { return u.kind }
func (u unknown) Describe() string        { return "a " + u.kind + " fault runs" }
func (u unknown) Windows(Layout) []Window { return nil }
func (u unknown) Run(context.Context, *runner, *Window, int) error {
	return fmt.Errorf("no fault %q is registered", u.kind)
}
func (u unknown) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return nothingFails(u)
}
func (u unknown) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) { return nothingCut(u) }

// windowFault is the fault that opened window w.
func windowFault(w Window) Fault {
	if f, ok := faultOf(w.Kind); ok {
		return f
	}
	return unknown{w.Kind}
}
