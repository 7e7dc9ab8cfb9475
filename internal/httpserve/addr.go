package httpserve

import (
	"net"
	"strconv"
)

// PodAddr is the address to listen on port at podIP (the contract.PodIPEnv the DaemonSets
// set). Without a pod IP (a binary run by hand) it is loopback, never every interface: on
// hostNetwork every interface is the node's, and every pod reaches them.
func PodAddr(podIP string, port int) string {
	if podIP == "" {
		podIP = "127.0.0.1"
	}
	return net.JoinHostPort(podIP, strconv.Itoa(port))
}
