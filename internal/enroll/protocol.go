package enroll

import (
	"fmt"
	"net/netip"
)

// Op is what the plugin asks.
type Op string

// The plugin's requests, one per CNI command.
const (
	OpAdd   Op = "add"
	OpCheck Op = "check"
	OpDel   Op = "del"
)

// Pod is what the plugin knows of the sandbox it sets up: the kubelet's CNI_ARGS, the
// runtime's netns path, and the address the main plugin gave (prevResult).
type Pod struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	UID         string `json:"uid,omitempty"`
	ContainerID string `json:"containerID"`
	Netns       string `json:"netns,omitempty"`
	IP          string `json:"ip,omitempty"`
}

func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// Validate rejects a request the agent cannot act on.
func (p Pod) Validate(op Op) error {
	if p.Namespace == "" || p.Name == "" {
		return fmt.Errorf("enroll: pod namespace and name are required (got %q/%q)", p.Namespace, p.Name)
	}
	if op != OpAdd {
		return nil
	}
	if p.Netns == "" {
		return fmt.Errorf("enroll: pod %s: netns path is required", p)
	}
	if p.IP != "" {
		if _, err := netip.ParseAddr(p.IP); err != nil {
			return fmt.Errorf("enroll: pod %s: ip: %w", p, err)
		}
	}
	return nil
}

// Request is the plugin's one message on a connection.
type Request struct {
	Op  Op  `json:"op"`
	Pod Pod `json:"pod"`
	// TimeoutMillis bounds how long the agent waits for the listener (add, check).
	TimeoutMillis int64 `json:"timeoutMillis,omitempty"`
}

// Reply is one agent message; an add gets two (see the package doc).
type Reply struct {
	Enrolled bool   `json:"enrolled"`
	Reason   string `json:"reason,omitempty"`
	// NodeAddrs are the node's own addresses (Decision.NodeAddrs), in the decision of an
	// enrolled pod.
	NodeAddrs []netip.Addr `json:"nodeAddrs,omitempty"`
	Listening bool         `json:"listening,omitempty"`
	Error     string       `json:"error,omitempty"`
}

// Decision is a Handler's answer to "is this pod enrolled?".
type Decision struct {
	Enrolled bool
	Reason   string // why (not): for logs and errors
	// NodeAddrs, for an enrolled pod, are the node's own IPv4 addresses its capture leaves
	// alone (capture.Config.NodeAddrs): the ones the agent's capture listeners refuse.
	NodeAddrs []netip.Addr
}
