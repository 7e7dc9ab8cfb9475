// Package cniplugin is svclb-cni, the chained CNI plugin that meshes the pods of enrolled
// namespaces without touching their specs.
//
// It runs after the cluster's main plugin (its entry in the node's conflist comes last). On
// ADD it first reads the agent's namespace view (enroll.NamespaceView, in
// contract.EnrollNamespacesFile): a pod of a namespace the view lists as not enrolled gets the
// previous result back untouched, without the agent, so such pods start while the agent is
// down. Otherwise it asks the agent on the node (package enroll, over contract.EnrollSocket)
// whether the pod is enrolled; the agent answers from its informers. For an enrolled pod it
// installs the capture rules of the svclb-capture init container (package capture: one
// implementation for both) in the pod's netns, leaving uncaptured the node's own addresses the
// agent's decision names (the ones its capture listeners refuse), and returns only once the agent reports the
// pod's capture listener listening there, so the pod's first connection is already captured. A
// pod that is not enrolled gets the previous result back untouched. If the agent cannot be
// reached the ADD fails (the kubelet retries): the pod's namespace is enrolled, or unknown to
// the view, or there is no usable view, and an enrolled pod must never run uncaptured.
// Namespaces listed in excludeNamespaces are passed through without reading or asking.
//
// DEL removes the rules (if the netns still exists) and tells the agent whatever the view
// says, and always succeeds. CHECK verifies the rules and the listener of an enrolled pod.
package cniplugin
