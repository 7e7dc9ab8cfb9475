// Coalescing: how long the loop gathers the changes that follow a push before the next one.

package agent

import (
	"context"
	"time"
)

// maxCoalesce bounds the coalescing window during a sustained burst: kube-proxy's nftables
// minSyncPeriod default, so the agent never waits longer than kube-proxy's own sync. Why the
// window widens at all: every push costs the xDS server work in proportion to every resource
// it holds, not to the change (go-control-plane's LinearCache compares each subscription's
// known versions with every resource, and each response carries the client's whole version
// map), so Services created one after the other, one push each, cost O(N) each and O(N²) for
// a fill. See docs/perf.md.
const maxCoalesce = time.Second

// coalesce runs after a push. It watches the changes that follow in slices of one debounce
// and says whether to push again (more), and the window to use after that push (next):
//   - a slice with nothing new ends the wait at once: the burst paused, so whatever it left is
//     pushed now (more) or, if nothing is waiting, the loop goes idle and the next change is
//     pushed the moment it arrives; next is back at the debounce;
//   - a window in which every slice brought a change (a sustained burst) is pushed when it
//     ends, and the next window is twice as wide, up to s.maxCoalesce.
//
// So a change never waits more than one debounce unless changes have kept coming at least
// once a debounce since the last push, and never more than s.maxCoalesce. With window equal
// to the debounce this is the fixed window the loop had before. ok is false when ctx ended.
func (s *syncer) coalesce(ctx context.Context, window, debounce time.Duration) (more bool, next time.Duration, ok bool) {
	for waited := time.Duration(0); ; {
		step := min(debounce, window-waited)
		select {
		case <-ctx.Done():
			return false, 0, false
		case <-s.clock.After(step):
		}
		waited += step
		select {
		case <-s.kick:
			more = true
		default:
			return more, debounce, true
		}
		if waited >= window {
			return true, min(2*window, max(s.maxCoalesce, debounce)), true
		}
	}
}
