package soak

import (
	"context"

	"github.com/aether-mesh/svclb/fixtures/cluster"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

// Fault is one kind of fault of the schedule: one type per fault, each in
// its own file, as cilium-cli's connectivity tests are one type each, and
// listed once in registry. The scheduler runs it, the judge asks it what
// its windows allow, the report describes it: nothing else knows a fault
// by its kind.
type Fault interface {
	// Name is the fault's SOAK_FAULTS name and its windows' Kind.
	Name() string
	// Describe says what happens while its window is open, as the judge's
	// reasons put it ("no failure is allowed while …").
	Describe() string
	// Windows are the windows one run of the fault opens on a cluster of
	// layout l, in order (one per node for a fault that hits each node in
	// turn), each with its Name (the scheduler adds the cycle) and, when
	// known beforehand, its Node.
	Windows(l Layout) []Window
	// Run runs window w in cycle (0: the first). It sets w.Start at its
	// first action, may set w.End at the signal that it is over (else the
	// scheduler sets it when Run returns) and fills what the judge reads
	// (Target, Pods, …), its Steps and its Notes.
	Run(ctx context.Context, r *runner, w *Window, cycle int) error
	// Fails says whether window w allows event e of client c (a failed
	// attempt, or a failed opening of a long-lived connection) and why: the
	// reason an attributed failure carries.
	Fails(r *Record, w Window, c Client, e echo.LoadEvent) (bool, string)
	// Cuts says whether window w allows long-lived connection e of client c
	// to be cut, and why.
	Cuts(r *Record, w Window, c Client, e echo.LoadEvent) (bool, string)
}

// Layout is the cluster a fault plans its windows on.
type Layout struct {
	Nodes, Workers []string
	ControlPlane   string
}

// A Fault may also implement these.
type (
	// preparer needs something in place before the load starts (setup).
	preparer interface {
		Prepare(ctx context.Context, r *runner) error
	}
	// settler waits, after its windows and before the gap, for what the
	// next fault needs back; what it finds wrong it records as an error.
	settler interface {
		Settle(ctx context.Context, r *runner)
	}
	// stopper stops load clients: a restart of client c's load in window
	// w, and the seconds it could not count there, are the fault's.
	stopper interface {
		Stops(w Window, c Client) bool
	}
	// needer runs only on some clusters (the nodes in the local Docker engine, node access
	// that does not pass through the apiserver): Needs is nil where it can run on c, else
	// why not, and the scheduler skips it (runnable).
	needer interface {
		Needs(c *cluster.Cluster) error
	}
	// analyzer derives figures of its own from the record alone (Analyze)
	// for window w, and returns the bounds they must keep.
	analyzer interface {
		Analyze(r *Record, w Window) []Bound
	}
)

// nothingFails and nothingCut are the rules of a window that allows
// nothing, in f's words.
func nothingFails(f Fault) (bool, string) {
	return false, "no failure is allowed while " + f.Describe()
}

func nothingCut(f Fault) (bool, string) {
	return false, "no long-lived connection of this kind may be cut while " + f.Describe()
}

// one is the single window of a fault that runs once per cycle.
func one(name string) []Window { return []Window{{Name: name}} }
