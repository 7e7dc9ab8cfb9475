// Package nodeexec is svclb-nodeexec: the suites' way onto a node that is not a container of
// the local Docker engine. It runs in the node-access DaemonSet (privileged, hostNetwork,
// hostPID, the node's / mounted at contract.HostRoot); a suite execs into that pod through the
// apiserver (pods/exec) and the binary chroots into the node's root and execs the command there,
// so nft, ip, bash and /proc are the node's own, in its network and PID namespaces — what
// `docker exec <node>` gives on kind.
//
//	nodeexec.go   Main (serve, exec), Exec (chroot, path lookup in the new root, exec)
package nodeexec
