package httpserve

import (
	"net"
	"strconv"
)

// LoopbackAddr is the address the agent's and the guard's HTTP listen on by default: port on
// 127.0.0.1. Both run on hostNetwork, where every other address is the node's and reached by
// every pod; kube-proxy binds its metrics the same way. Readers run in the container
// (internal/loopget, through kubectl exec) or on the node.
func LoopbackAddr(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
