package evidence

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Cut is what kube-proxy held of one cut Service around a run. "Cut" means
// the guard has cut kube-proxy's ClusterIP entries of it on every node
// (each element's verdict overwritten with continue)
// (its NodePort path stays kube-proxy's); a run during which kube-proxy
// restored them measured kube-proxy, not the leg.
type Cut struct {
	// Service is namespace/name.
	Service string `json:"service"`
	// Before and After are the Service's ClusterIP entries (service-ips and
	// no-endpoint-services elements keyed by its ClusterIP) in each node's
	// `nft list table ip kube-proxy` right before and right after the run;
	// a reading that finds some is repeated for up to RestoreTolerance.
	Before map[string]int `json:"before"`
	After  map[string]int `json:"after"`
	// Redeletions are the guard's re-deletions of the Service per node
	// during the run: each one is kube-proxy having restored it in between
	// (kube-proxy rewrites its entries on its full syncs; the guard cuts
	// them again).
	Redeletions map[string]int `json:"redeletions,omitempty"`
	// SlowestRedeletion is, per node with re-deletions, an upper bound in
	// seconds of the slowest re-deletion the guard made there during the
	// run (its latency histogram's highest bucket that rose; +Inf beyond
	// the last one).
	SlowestRedeletion map[string]float64 `json:"slowestRedeletionSeconds,omitempty"`
	// RestoreExpected: the leg restarts kube-proxy itself
	// (reach-after-resync); a restore during the run is its subject, only
	// the states before and after must be cut.
	RestoreExpected bool `json:"restoreExpected,omitempty"`
}

// RestoreTolerance is how long a restore by kube-proxy may stand before the
// guard cuts it again without the run losing its premise. kube-proxy
// rewrites its entries on its full syncs, and the guard, watching nftables,
// cuts them again within milliseconds: that is the guard working, and it
// cannot make a run pass falsely (a green connection goes to an endpoint,
// never to the VIP; a red one that met a restored rule would be answered,
// which fails red). A restore that stood a second or more means the guard
// itself lagged: the run observed another setup.
const RestoreTolerance = time.Second

// Held reports whether the Service stayed cut through the run, or says
// what broke it: kube-proxy ClusterIP entries of it before or after the run, or a
// restore in between that the guard took RestoreTolerance or more to undo.
func (c Cut) Held() (bool, string) {
	var broke []string
	for _, when := range []struct {
		what string
		objs map[string]int
	}{{"before", c.Before}, {"after", c.After}} {
		for _, n := range slices.Sorted(maps.Keys(when.objs)) {
			if k := when.objs[n]; k > 0 {
				broke = append(broke, fmt.Sprintf("%d kube-proxy ClusterIP entries of it on %s %s the run", k, n, when.what))
			}
		}
	}
	if !c.RestoreExpected {
		for _, n := range slices.Sorted(maps.Keys(c.Redeletions)) {
			slowest, known := c.SlowestRedeletion[n]
			switch k := c.Redeletions[n]; {
			case k <= 0:
			case !known:
				broke = append(broke, fmt.Sprintf("restored %d× on %s during the run, re-cut after an unknown time", k, n))
			case slowest >= RestoreTolerance.Seconds():
				broke = append(broke, fmt.Sprintf("restored %d× on %s during the run, one standing up to %s before the guard cut it again", k, n, bound(slowest)))
			}
		}
	}
	if len(broke) == 0 {
		return true, ""
	}
	return false, "kube-proxy held " + c.Service + ": " + strings.Join(broke, "; ")
}

// Restores says how often kube-proxy restored the Service during the run
// and how fast the guard cut it again ("" when it never did).
func (c Cut) Restores() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(c.Redeletions)) {
		if k := c.Redeletions[n]; k > 0 {
			p := fmt.Sprintf("%d× on %s", k, n)
			if s, ok := c.SlowestRedeletion[n]; ok {
				p += " (re-cut within " + bound(s) + ")"
			}
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "kube-proxy's syncs restored " + c.Service + " " + strings.Join(parts, ", ") + " and the guard cut it again"
}

// CutHeld reports whether every cut Service of the run stayed cut (true
// when it has none), or says what broke.
func (r *Run) CutHeld() (bool, string) {
	var why []string
	for _, c := range r.Cuts {
		if ok, w := c.Held(); !ok {
			why = append(why, w)
		}
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// bound prints a latency bound in seconds as a duration.
func bound(s float64) string {
	if math.IsInf(s, 1) {
		return "beyond the histogram's last bucket"
	}
	return time.Duration(s * float64(time.Second)).String()
}
