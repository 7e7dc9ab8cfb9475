package specs

import (
	"strings"
	"testing"
)

// TestRedPassReason: the specs of the services set that passed red in a full run each have a
// reason read from their name, and a spec served through the agent gets none.
func TestRedPassReason(t *testing.T) {
	for spec, want := range map[string]string{
		"Services should fail health check node port if there are only terminating endpoints":                                        "health check node ports",
		"Services should fallback to local terminating endpoints when there are no ready endpoints with externalTrafficPolicy=Local": "NodePorts",
		"Services should fallback to terminating endpoints when there are no ready endpoints with externallTrafficPolicy=Cluster":    "NodePorts",
		"Services should not be able to connect to terminating and unready endpoints if PublishNotReadyAddresses is false":           "expects no connection",
		"Services should support externalTrafficPolicy=Local for type=NodePort":                                                      "NodePort traffic",
	} {
		if got := RedPassReason(spec); !strings.Contains(got, want) {
			t.Errorf("RedPassReason(%q) = %q, want it to say %q", spec, got, want)
		}
	}
	for _, spec := range []string{
		"Services should fallback to local terminating endpoints when there are no ready endpoints with internalTrafficPolicy=Local",
		"Services should serve a basic endpoint from pods [Conformance]",
	} {
		if got := RedPassReason(spec); !strings.Contains(got, "no reason known") {
			t.Errorf("RedPassReason(%q) = %q: a spec the agent serves needs its log read", spec, got)
		}
	}
}
