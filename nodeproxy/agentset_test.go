package nodeproxy

import (
	"testing"

	"github.com/aether-mesh/svclb/internal/translate/translatetest"
	"github.com/aether-mesh/svclb/nodeproxy/internal/xdsconfig"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestAgentRepresentativeSetIsAccepted parses the agent's representative
// one-node snapshot (the one its golden file records), in proactive and in
// on-demand CDS mode, with this proxy's validation: a NACK here is a contract
// break between the two pieces.
func TestAgentRepresentativeSetIsAccepted(t *testing.T) {
	for mode, onDemand := range map[string]bool{"proactive": false, "on-demand": true} {
		t.Run(mode, func(t *testing.T) {
			s := translatetest.RepresentativeSet(onDemand)
			if len(s.Listeners) == 0 || len(s.Clusters) == 0 || len(s.Loads) == 0 {
				t.Fatalf("representative set has %d listeners, %d clusters, %d assignments", len(s.Listeners), len(s.Clusters), len(s.Loads))
			}
			for name, l := range s.Listeners {
				pl, err := xdsconfig.ParseListener(l)
				if err != nil {
					t.Errorf("NACK of the agent's listener: %v", err)
					continue
				}
				if svc := pl.Chains[contract.ChainSvc]; svc == nil || (svc.TCP.OnDemand != nil) != onDemand {
					t.Errorf("listener %s: cap_svc %+v, want on_demand %v", name, svc, onDemand)
				}
			}
			for _, c := range s.Clusters {
				if _, err := xdsconfig.ParseCluster(c); err != nil {
					t.Errorf("NACK of the agent's cluster: %v", err)
				}
			}
			for _, a := range s.Loads {
				if _, err := xdsconfig.ParseAssignment(a); err != nil {
					t.Errorf("NACK of the agent's assignment: %v", err)
				}
			}
		})
	}
}
