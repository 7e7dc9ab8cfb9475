// The CDS mode: which svc: clusters the agent publishes, and where the mode comes from.

package agent

import (
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// CDSMode says which svc: clusters the agent publishes.
type CDSMode string

const (
	// CDSProactive publishes a cluster for every known Service port (the default).
	CDSProactive CDSMode = "proactive"
	// CDSOnDemand publishes only the clusters the node proxy asked for (ODCDS over ADS).
	CDSOnDemand CDSMode = "on-demand"
)

// ParseCDSMode parses a --cds flag or ConfigMap value.
func ParseCDSMode(s string) (CDSMode, error) {
	switch m := CDSMode(s); m {
	case CDSProactive, CDSOnDemand:
		return m, nil
	}
	return "", fmt.Errorf("CDS mode %q: want %q or %q", s, CDSProactive, CDSOnDemand)
}

// cdsModeOf reads the ConfigMap's "cds" key; missing or unparsable (logged) keeps def.
func cdsModeOf(log *slog.Logger, o any, def CDSMode) CDSMode {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return def
	}
	v, ok := cm.Data[contract.KeyCDS]
	if !ok {
		return def
	}
	m, err := ParseCDSMode(v)
	if err != nil {
		log.Error("ignoring unparsable CDS mode in ConfigMap", "configmap", contract.Namespace+"/"+contract.AgentConfigMap, "key", contract.KeyCDS, "value", v, "error", err)
		return def
	}
	return m
}
