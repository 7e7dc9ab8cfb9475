package xdsserver

import (
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// AddRefused counts n connections refused for reason to svc that no access log reported: the
// SYNs the pods' refuse tables reset (agent, refuser.go) never reached the node proxy.
func (s *Server) AddRefused(reason string, svc k8stypes.NamespacedName, n uint64) {
	s.refused.WithLabelValues(reason, svc.Namespace, svc.Name).Add(float64(n))
}
