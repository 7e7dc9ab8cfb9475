package measure

import (
	"context"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/evidence"
	"github.com/aether-mesh/svclb/fixtures/agent"
	"github.com/aether-mesh/svclb/fixtures/cluster"
)

// ReadRefusals reads every node's agent log since since for refusal
// records (agent.RefusalLogs), sorted by time.
func ReadRefusals(ctx context.Context, c *cluster.Cluster, since time.Time) ([]evidence.Refusal, error) {
	ls, err := agent.RefusalLogs(ctx, c, since)
	out := make([]evidence.Refusal, 0, len(ls))
	for _, l := range ls {
		out = append(out, record(l))
	}
	return out, err
}

// record is a log line as the evidence keeps it.
func record(l agent.RefusalLog) evidence.Refusal {
	return evidence.Refusal{Node: l.Node, At: l.Time, Reason: l.Reason, Namespace: l.Namespace, Service: l.Service,
		Destination: l.Destination, Source: l.Source, Flag: l.Flag, Cluster: l.Cluster}
}
