package soak

import "time"

// The kubelet holds back the restart of a container that exits within
// 10 min of its last restart, 10 s doubling up to 5 min (CrashLoopBackOff;
// client-go flowcontrol.Backoff forgets an entry after twice its 5 min
// maximum). A long soak's cycles are about 5 min apart, so a container
// fault (and an apiserver outage, which makes the controllers exit)
// repeats only once backOffForgotten has passed since the container was
// last back: within it, the fault would measure the kubelet's policy,
// not the container's restart. restartWithin still covers the longest
// hold, should one happen.
const (
	backOffForgotten = 10*time.Minute + 30*time.Second
	restartWithin    = 6 * time.Minute
)

// heldBack says whether a window about to restart what on node (when it
// was last back: restarted[key]) is skipped: the kubelet would hold the
// restart back. The window then notes why and ends at once.
func (r *runner) heldBack(w *Window, key, what, node string) bool {
	last, ok := r.restarted[key]
	if !ok || time.Since(last) >= backOffForgotten {
		return false
	}
	w.Skipped = true
	w.notef("skipped: %s on %s came back %s ago; the kubelet holds a restart within %s of the last one back (CrashLoopBackOff)",
		what, node, time.Since(last).Round(time.Second), backOffForgotten)
	return true
}
