// Settings: what the agent's ConfigMap and its Node say (phases, zone).

package agent

import (
	"log/slog"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func nodeOf(name string, o any) translate.Node {
	n := translate.Node{Name: name}
	if node, ok := o.(*corev1.Node); ok && node.Name == name {
		n.Zone = node.Labels[corev1.LabelTopologyZone]
	}
	return n
}

func phasesOf(log *slog.Logger, o any, p1, p2 bool) (bool, bool) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return p1, p2
	}
	parse := func(key string, def bool) bool {
		v, ok := cm.Data[key]
		if !ok {
			return def
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			log.Error("ignoring unparsable phase in ConfigMap", "configmap", contract.Namespace+"/"+contract.AgentConfigMap, "key", key, "value", v)
			return def
		}
		return b
	}
	return parse(contract.KeyPhase1, p1), parse(contract.KeyPhase2, p2)
}
