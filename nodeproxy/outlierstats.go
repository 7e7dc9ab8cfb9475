package nodeproxy

import "github.com/aether-mesh/svclb/nodeproxy/internal/lb"

// Envoy's outlier detection stats under cluster.<stat name>.outlier_detection.
// (source/common/upstream/outlier_detection_impl.h ALL_OUTLIER_DETECTION_STATS).
// Counters live in the proxy's stat store, so like Envoy's they outlive a CDS
// update that replaces the cluster's detector; ejections_active is a gauge
// read from the detector that serves now.
const (
	odPrefix            = "outlier_detection."
	odEjectionsActive   = odPrefix + "ejections_active"
	odEjectionsOverflow = odPrefix + "ejections_overflow"
	odEnforcedTotal     = odPrefix + "ejections_enforced_total"
	odDetectedLocal     = odPrefix + "ejections_detected_consecutive_local_origin_failure"
	odEnforcedLocal     = odPrefix + "ejections_enforced_consecutive_local_origin_failure"
)

// countOutlier adds what one Report changed to the counters of the cluster
// whose stat prefix is cs.
func (p *Proxy) countOutlier(cs string, before, after lb.OutlierStats) {
	if d := after.EjectionsOverflow - before.EjectionsOverflow; d > 0 {
		p.stats.add(cs+odEjectionsOverflow, int64(d))
	}
	if d := after.DetectedConsecutiveLocalOrigin - before.DetectedConsecutiveLocalOrigin; d > 0 {
		p.stats.add(cs+odDetectedLocal, int64(d))
	}
	if d := after.EnforcedConsecutiveLocalOrigin - before.EnforcedConsecutiveLocalOrigin; d > 0 {
		p.stats.add(cs+odEnforcedLocal, int64(d))
		p.stats.add(cs+odEnforcedTotal, int64(d))
	}
}

// outlierGaugesLocked sets ejections_active of every active cluster with a detector;
// the caller holds p.mu.
func (p *Proxy) outlierGaugesLocked(into map[string]int64) {
	for _, c := range p.clusters {
		if c.detector == nil {
			continue
		}
		into[clusterStatPrefix(c.cfg.StatName)+odEjectionsActive] = int64(c.detector.Stats().EjectionsActive)
	}
}

// clusterStatPrefix is Envoy's scope of a cluster's stats (alt_stat_name, else name).
func clusterStatPrefix(statName string) string { return "cluster." + statName + "." }
