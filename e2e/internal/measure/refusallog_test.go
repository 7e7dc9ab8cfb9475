package measure

import (
	"testing"
	"time"

	"github.com/aether-mesh/svclb/fixtures/agent"
)

func TestRecord(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 5e8, time.UTC)
	r := record(agent.RefusalLog{Time: at, Node: "w1", Reason: "no-endpoints", Namespace: "legs", Service: "noep",
		Destination: "10.96.0.30:80", Source: "10.244.1.9:40112", Flag: "UH", Cluster: "svc:10.96.0.30:80"})
	if r.Node != "w1" || r.Reason != "no-endpoints" || r.Namespace != "legs" || r.Service != "noep" || r.Destination != "10.96.0.30:80" ||
		r.Source != "10.244.1.9:40112" || r.Flag != "UH" || r.Cluster != "svc:10.96.0.30:80" || !r.At.Equal(at) {
		t.Errorf("record %+v", r)
	}
}
