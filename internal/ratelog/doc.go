// Package ratelog bounds the log lines an event a pod can drive writes: a token bucket per
// key (Gate, Keyed), so the first lines of a burst are written and a flood costs a steady
// trickle, with the events over the limit counted and reported by the caller in summary
// lines ("N more suppressed"). It writes nothing itself: callers log what it allows.
package ratelog
