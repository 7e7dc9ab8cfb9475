// The CDS mode: which svc: clusters the agent publishes (the agent's settings parse it).

package agentstatus

// CDSMode says which svc: clusters the agent publishes.
type CDSMode string

const (
	// CDSProactive publishes a cluster for every known Service port (the default).
	CDSProactive CDSMode = "proactive"
	// CDSOnDemand publishes only the clusters the node proxy asked for (ODCDS over ADS).
	CDSOnDemand CDSMode = "on-demand"
)
