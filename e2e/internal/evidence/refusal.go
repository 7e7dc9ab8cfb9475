package evidence

import "time"

// Refusal is one record of the agent's refusal log: a captured connection
// the node proxy refused and reported over its access log, as the agent
// classified it (agent/internal/xdsserver Classify).
type Refusal struct {
	// Node is the node whose agent logged it.
	Node   string    `json:"node"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	// Namespace and Service name the Service ("" for no-service).
	Namespace string `json:"namespace,omitempty"`
	Service   string `json:"service,omitempty"`
	// Destination is the connection's downstream local address: the
	// VIP:port the client dialled, restored by the capture.
	Destination string `json:"destination"`
	Source      string `json:"source,omitempty"`
	// Flag is Envoy's response flag: UH (no healthy upstream) or NC (no
	// cluster).
	Flag    string `json:"flag,omitempty"`
	Cluster string `json:"cluster,omitempty"`
}
