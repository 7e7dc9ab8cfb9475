// Package legsuite is a suite of its own, in a module of its own, that
// declares a leg against svclb's framework (fixtures/leg) the way any other
// suite would: one leg.Suite, one leg.Define per leg, the order they run
// in. Its unit test checks the declaration without a cluster; its
// acceptance run (SVCLB_E2E=1) sets the cluster up with the framework's
// env funcs and runs the leg red, then green. README.md says how.
package legsuite
