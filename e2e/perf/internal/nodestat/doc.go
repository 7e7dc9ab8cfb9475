// Package nodestat reads, on a node, what one process of a node
// component costs: its container's CPU time (the cgroup's counter: cgroup v1
// cpuacct.usage or v2 cpu.stat usage_usec, which counts the children it runs,
// kube-proxy's nft, too) and its resident memory (VmRSS, VmHWM). It runs one
// shell script on the node through the caller's exec (the suite's NodeExec: docker exec on
// kind, else the node-access DaemonSet's chroot), which needs pgrep, awk and /proc.
// ReadMachine reads the node's CPU times (/proc/stat's first line, with head).
package nodestat
