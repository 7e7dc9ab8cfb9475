// Package nodestat reads, on a kind node, what one process of a node
// component costs: its container's CPU time (the cgroup's counter: cgroup v1
// cpuacct.usage or v2 cpu.stat usage_usec, which counts the children it runs,
// kube-proxy's nft, too) and its resident memory (VmRSS, VmHWM). It runs one
// shell script in the node container (docker exec), which has pgrep, awk and
// /proc.
package nodestat
