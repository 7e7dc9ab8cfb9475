package specs

import (
	"regexp"
	"strings"
)

// featureLabel is the text upstream's framework.WithFeature puts in a spec's
// name; its own jobs run such a spec only where the feature is set up.
var featureLabel = regexp.MustCompile(`\[Feature:[^\]]+\]`)

// NotRunnable says why spec cannot run on the suite's kind cluster, from the
// labels upstream writes into its name. Specs that need a cloud provider,
// SSH to the nodes or more zones are not here: e2e.test skips them at run
// time itself, and the row carries upstream's own message.
func NotRunnable(spec string) (string, bool) {
	if f := featureLabel.FindString(spec); f != "" {
		return "upstream gates it behind " + f + ", which the kind cluster does not set up", true
	}
	if strings.Contains(spec, "[Flaky]") {
		return "upstream marks it [Flaky]: its own jobs do not run it", true
	}
	return "", false
}

// Serial says whether spec must run with nothing beside it: upstream runs
// [Serial] and [Disruptive] specs (which restart kube-proxy or the apiserver,
// or take a cluster-wide resource) one at a time, after the parallel ones.
func Serial(spec string) bool {
	return strings.Contains(spec, "[Serial]") || strings.Contains(spec, "[Disruptive]")
}

// redPass are reasons a spec passes with the agent's flags off and kube-proxy
// cut, by what the spec exercises, first match wins. They are read from the
// spec's name, so a row whose spec matches none says so.
var redPass = []struct{ in, why string }{
	{"NodePort", "NodePort traffic is kube-proxy's"},
	{"ExternalName", "an ExternalName Service is DNS only"},
	{"ExternalIP", "ExternalIPs are kube-proxy's"},
	{"LoadBalancer", "LoadBalancer traffic is kube-proxy's"},
	{"hostNetwork", "hostNetwork clients are not captured"},
	{"HealthCheckNodePort", "health check node ports are kube-proxy's"},
	{"health check node port", "health check node ports are kube-proxy's"},
	{"externalTrafficPolicy=Local", "externalTrafficPolicy applies to NodePorts, which are kube-proxy's"},
	{"externallTrafficPolicy=Cluster", "externalTrafficPolicy applies to NodePorts, which are kube-proxy's"}, // upstream's spelling
	{"not be able to connect", "it expects no connection, which a cut path also gives: only green judges the agent here"},
	{"secure master service", "API only (default/kubernetes is never cut)"},
	{"lifecycle", "API only"},
	{"listing all namespaces", "API only"},
	{"delete a collection", "API only"},
	{"create endpoints for unready pods", "API only"},
	{"different protocols", "UDP is kube-proxy's"},
	{"SCTP", "SCTP is kube-proxy's"},
	{"rejected", "a refusal is a refusal on either path"},
	{"service-proxy-name", "a Service kube-proxy ignores is not cut"},
	{"headless", "a headless Service has no ClusterIP"},
}

// RedPassReason is why spec may pass red, or a prompt to look.
func RedPassReason(spec string) string {
	for _, r := range redPass {
		if strings.Contains(spec, r.in) {
			return r.why
		}
	}
	return "no reason known from its name: read its log"
}
