// Status and the types it carries.

package agentstatus

import "time"

// Status is the /status document (see the package doc).
type Status struct {
	Node string `json:"node"`
	Zone string `json:"zone"`
	// NodeAddresses are the node's own IPv4 addresses, which every capture listener refuses
	// with the fixed node-local ranges (chain cap_refused).
	NodeAddresses   []string         `json:"nodeAddresses"`
	Phase1          bool             `json:"phase1"`
	Phase2          bool             `json:"phase2"`
	SnapshotVersion uint64           `json:"snapshotVersion"`
	Clusters        int              `json:"clusters"`
	Endpoints       int              `json:"endpoints"`
	Listeners       []ListenerStatus `json:"listeners"`
	RangeKnown      bool             `json:"rangeKnown"`
	Range           []string         `json:"range"`
	CDS             CDSMode          `json:"cds"`
	Demanded        int              `json:"demanded"`
	Pending         int              `json:"pending"`
	// Forgotten counts the Service-range addresses of refused names not kept in pending
	// (pending full): a Service created at one is still published.
	Forgotten int `json:"forgotten"`
	// Refusal is the agent's refusal setting: "reset" (a SYN to a Service port with no
	// endpoint for the node is reset in the pod's netns, in force while both phases are on) or
	// "close" (such a connection is accepted and closed).
	Refusal string `json:"refusal"`
	// RefusedAtSyn counts the Service ports (VIP:port) without endpoints the captured pods'
	// refuse tables reset (0 unless reset is in force); the ports the served Services do not
	// declare, also reset, are not counted here.
	RefusedAtSyn int `json:"refusedAtSyn"`
	// SettingsErrors are the agent ConfigMap's keys whose values are not in effect (bad values,
	// unknown keys), by key; empty when every value is.
	SettingsErrors []SettingError `json:"settingsErrors"`
	// Enrollment is set when the agent serves the CNI plugin.
	Enrollment *EnrollmentStatus `json:"enrollment,omitempty"`
}

// ListenerStatus is one capture listener.
type ListenerStatus struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Netns     string `json:"netns"`
	Name      string `json:"name"`
}

// SettingError is a ConfigMap key whose value the agent does not use (/status "settingsErrors").
type SettingError struct {
	Key string `json:"key"`
	// Value is the value refused, Go-quoted; a long one is cut and its length added.
	Value string `json:"value"`
	// Kept is the value in effect instead, as the ConfigMap would spell it; "" for a key the
	// agent does not know.
	Kept   string `json:"kept"`
	Reason string `json:"reason"`
}

// EnrollmentStatus is the /status view of enrollment.
type EnrollmentStatus struct {
	NamespaceSelector string `json:"namespaceSelector"`
	// Enrolled are the pods the plugin set up ("namespace/name").
	Enrolled []string `json:"enrolled"`
	// Uncaptured are running pods the selector enrolls that the plugin never saw (they
	// started before it was installed, or while the agent was down after their namespace was
	// labelled, so the plugin's namespace view still said not enrolled): restart them to
	// capture them.
	Uncaptured []string `json:"uncaptured"`
	// NamespaceView is the view of the enrolled namespaces published for the plugin; nil: none.
	NamespaceView *NamespaceViewStatus `json:"namespaceView,omitempty"`
}

// NamespaceViewStatus is the /status view of the namespace view published for the CNI plugin.
type NamespaceViewStatus struct {
	File string `json:"file"`
	// Generation and WrittenAt are the last view written (0: none yet).
	Generation uint64    `json:"generation"`
	WrittenAt  time.Time `json:"writtenAt,omitzero"`
	// Error is why the last write failed; the file was then removed, so the plugin asks the
	// agent about every pod rather than read a view the agent no longer holds.
	Error string `json:"error,omitempty"`
}
