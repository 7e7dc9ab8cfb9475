// Package evidence is the name the svclb-e2e CLI still imports for the
// evidence directory: the records themselves are public now, in
// fixtures/evidence, so that another suite's legs fill the same Run. Only
// what the CLI uses is aliased here; new code imports fixtures/evidence.
package evidence
