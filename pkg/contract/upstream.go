package contract

import "time"

// How the node proxy connects a meshed caller to one endpoint of a Service (a svc: cluster's
// connect_timeout and its tcp_proxy's max_connect_attempts; docs/design.md, "Connect timeout and
// retries"), chosen against what the same caller sees through kube-proxy.
//
// Through kube-proxy the caller's own SYN is DNATed to one endpoint, and conntrack pins every
// retransmission to it. An endpoint that refuses (RST) fails the caller's connect at once; one
// that drops SYNs (a node gone, a blackholed pod) costs the caller its kernel's whole SYN
// schedule to that one endpoint, the initial RTO of 1 s doubling (retransmissions at 1, 3, 7, 15,
// 31 and 63 s; net.ipv4.tcp_syn_retries 6 gives up after about 127 s), or its own connect
// timeout, whichever is first. A captured caller's connect completes at the proxy's listener at
// once; its wait is the proxy's attempts.
const (
	// SvcConnectTimeout is a svc: cluster's connect_timeout: 2 s, between the proxy's first SYN
	// retransmission (1 s, Linux's TCP_TIMEOUT_INIT) and its second (3 s). One lost SYN to a
	// healthy endpoint is retransmitted within the attempt, costing the caller the 1 s it costs
	// through kube-proxy, and is not an outlier failure; 1 s would abandon the attempt just as
	// that retransmission leaves. An endpoint silent for 2 s (two SYNs unanswered) is most likely
	// dead: the attempt ends and the next one goes to another host at 2 s, where kube-proxy's
	// caller waits on for the same endpoint's 3 s, 7 s, ... retransmissions. Every expiry is
	// also a local-origin failure for outlier detection, so such an endpoint is ejected after
	// OutlierConsecutiveFailures of them.
	SvcConnectTimeout = 2 * time.Second
	// SvcMaxConnectAttempts is the svc: tcp_proxy's max_connect_attempts: each attempt takes a
	// new host from the load balancer (round robin moves on), so one dead endpoint never fails a
	// caller's connection while another host is up, and 3 covers two dead endpoints met in a
	// row (a rolling restart). A caller waits at most 3 × SvcConnectTimeout = 6 s when every
	// attempt is blackholed (through kube-proxy: its connect timeout, up to 127 s), and an
	// endpoint that refuses costs microseconds per attempt. More attempts would add SYNs to a
	// Service that is down everywhere without helping one that is not. Under ClientIP affinity
	// (RING_HASH on the source address) every attempt picks the same host until it is ejected
	// (docs/envoy-fidelity.md, "Connect retries").
	SvcMaxConnectAttempts = 3
	// OutlierConsecutiveFailures is a svc: cluster's consecutive_local_origin_failure: failed
	// connect attempts in a row (refused or timed out, retried or not) that eject a host.
	OutlierConsecutiveFailures = 5
)
