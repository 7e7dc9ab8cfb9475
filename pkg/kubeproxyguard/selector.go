package kubeproxyguard

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/aether-mesh/svclb/internal/nsselector"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Where the namespace selector in effect comes from (NamespaceSelectorStatus.Source).
const (
	// SourceAgentConfigMap: the agent's ConfigMap (contract.AgentConfigMap, key
	// contract.KeyNamespaceSelector), read by the agent's rule (internal/nsselector).
	SourceAgentConfigMap = "agent-configmap"
	// SourceFlag: svclb-guard run --namespace-selector, an explicit override.
	SourceFlag = "flag"
)

// NamespaceSelectorStatus is the namespace selector the guard chooses Services by
// (/status "namespaceSelector").
type NamespaceSelectorStatus struct {
	Source string `json:"source"`
	// Selector is the selector in effect, kubectl syntax; "" matches every namespace.
	Selector string `json:"selector"`
	// AgentSelector is what the agent's ConfigMap gives by the agent's rule: Selector, unless
	// an override (SourceFlag) says otherwise.
	AgentSelector string `json:"agentSelector"`
	// Refused is the ConfigMap's value when it does not parse: the last good selector stays.
	Refused *RefusedValue `json:"refused,omitempty"`
}

// RefusedValue is a ConfigMap value not in effect, in the agent's terms (its /status
// "settingsErrors").
type RefusedValue struct {
	// Value is the value refused, Go-quoted and bounded (nsselector.Shown).
	Value string `json:"value"`
	// Kept is the selector in effect instead.
	Kept   string `json:"kept"`
	Reason string `json:"reason"`
}

// NamespaceSelection says which namespaces' Services WatchServicesByNamespace chooses.
type NamespaceSelection struct {
	// Override, when set, is the selector in effect whatever the agent's ConfigMap says
	// (svclb-guard run --namespace-selector). The ConfigMap is still read: /status shows
	// what it gives, and the guard warns while the two differ.
	Override *nsselector.Selector
}

// selectorSource follows the agent's ConfigMap as the agent does: its last good selector is
// kept while the value is bad (at start-up, nsselector.Default).
type selectorSource struct {
	override *nsselector.Selector
	agent    nsselector.Selector
}

func newSelectorSource(o NamespaceSelection) *selectorSource {
	return &selectorSource{override: o.Override, agent: nsselector.Default()}
}

// read applies the ConfigMap cm (nil: none) and returns the selector in effect and its status.
func (s *selectorSource) read(cm *corev1.ConfigMap) (nsselector.Selector, NamespaceSelectorStatus) {
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	sel, err := nsselector.Read(data, s.agent)
	s.agent = sel
	st := NamespaceSelectorStatus{Source: SourceAgentConfigMap, Selector: sel.Text, AgentSelector: sel.Text}
	if err != nil {
		st.Refused = &RefusedValue{Value: nsselector.Shown(data[contract.KeyNamespaceSelector]), Kept: sel.Text, Reason: nsselector.ShownReason(err)}
	}
	if s.override != nil {
		st.Source, st.Selector = SourceFlag, s.override.Text
		return *s.override, st
	}
	return sel, st
}

// SetNamespaceSelector records the namespace selector in effect for /status, and logs each
// change of it, of a refused ConfigMap value, and of an override's disagreement, once: the
// watch calls it on every change of a Service or Namespace.
func (g *Guard) SetNamespaceSelector(st NamespaceSelectorStatus) {
	g.mu.Lock()
	old := g.st.NamespaceSelector
	g.st.NamespaceSelector = &st
	g.mu.Unlock()
	if old == nil {
		old = &NamespaceSelectorStatus{Selector: "\x00"} // nothing was in effect: every line is news
	}
	attrs := []any{"source", st.Source, "selector", st.Selector, "configmap", contract.Namespace + "/" + contract.AgentConfigMap}
	if st.Refused != nil && !sameRefusal(old.Refused, st.Refused) {
		g.log.Warn("the agent ConfigMap's namespace selector is not used: the last good one stays, as in the agent",
			append(attrs, "key", contract.KeyNamespaceSelector, "value", st.Refused.Value, "kept", st.Refused.Kept, "reason", st.Refused.Reason)...)
	}
	if old.Selector != st.Selector {
		g.log.Info("namespace selector in effect", attrs...)
	}
	if st.Source == SourceFlag && st.AgentSelector != st.Selector && (old.AgentSelector != st.AgentSelector || old.Selector != st.Selector) {
		g.log.Warn("--namespace-selector overrides the agent's namespace selector: a Service of a namespace only one of them selects is cut for clients the agent does not mesh, or left on kube-proxy's path for ones it does",
			append(attrs, "agentSelector", st.AgentSelector)...)
	}
}

// sameRefusal reports whether a and b refuse the same value (both nil: nothing refused).
func sameRefusal(a, b *RefusedValue) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
