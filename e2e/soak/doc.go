// Package soak is `make soak` (e2e/soak/soak.mk, docs/soak.md): steady meshed
// traffic on the kind cluster while a schedule of faults runs, judged
// failure by failure.
//
// TestSoak (gated by SVCLB_SOAK=1, which e2e/soak/run.sh sets) chooses how
// it reads nodes and deploys the guard and the node DaemonSet with fixtures/
// env funcs, as the acceptance legs do; Run deploys the workloads (guarded echo Services, meshed load
// clients running `svclb-echo load`), runs the faults (each a Fault, one
// file each, listed in registry; the mechanisms are fixtures/faults'; one
// the cluster does not allow is skipped, saying why) and records what happened: every client event, every
// fault's window and instants, the agents' refusal lines, samples of every
// node's agent and proxy, and the proposal's figures. Judge attributes every
// failure and every cut long-lived connection to the window it fell in
// and asks that window's fault whether it allows it; Write renders report.md and
// report.html (an inline-SVG timeline) from the Record alone, and
// soak.json holds it.
package soak
