// Package netnsfind finds the network namespace file of a pod on its node by the pod's IP: the
// CNI names the files (/var/run/netns/cni-…) but not after the pod, so the finder looks inside
// each namespace (read-only, over netlink) for an interface holding the address. Two namespaces
// holding it is an error, never a pick: a pod can add another pod's address to its own interface.
package netnsfind
