// Package nsselector is the namespace selector of the agent's ConfigMap
// (contract.AgentConfigMap, key contract.KeyNamespaceSelector): its grammar and
// its rule for an absent or bad value. The agent enrolls namespaces by it
// (agent/settings.go) and the guard cuts the Services of the namespaces it
// enrolls (pkg/kubeproxyguard); both read the one value through this package,
// so they read it one way:
//
//   - absent key (or no ConfigMap): Default, contract.DefaultNamespaceSelector;
//   - a value labels.Parse takes (kubectl's grammar): that selector; the empty
//     value matches every namespace;
//   - any other value: the selector in effect before (at start-up, Default),
//     and the parse error, for the reader to report.
package nsselector
