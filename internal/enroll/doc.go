// Package enroll is the protocol between the chained CNI plugin (cmd/svclb-cni) and the agent
// on its node, over the unix socket contract.EnrollSocket.
//
// One connection carries one exchange of newline-delimited JSON:
//
//	plugin → agent   Request{Op: add, Pod}
//	agent  → plugin  Reply{Enrolled, Reason, NodeAddrs} the decision, from the agent's informers
//	                 (enrolled only: the plugin installs the capture rules meanwhile, leaving
//	                 NodeAddrs, the node's addresses the listener refuses, uncaptured)
//	agent  → plugin  Reply{Listening: true} | Reply{Error}
//	                 once the pod's capture listener listens in the pod's netns, or it gave up
//
// Check asks for the decision and, for an enrolled pod, that the listener listens; Del
// forgets the pod. Server runs a Handler (the agent, or a test's fake); Client is the plugin's
// side.
//
// Besides the socket, the agent publishes a NamespaceView, a file the plugin reads first: a pod
// of a namespace it lists as not enrolled is passed through without the agent.
package enroll
