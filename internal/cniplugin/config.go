package cniplugin

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// DefaultTimeout bounds an ADD's wait for the agent and the pod's listener.
const DefaultTimeout = 60 * time.Second

// NetConf is the plugin's entry in the conflist.
type NetConf struct {
	types.PluginConf
	// AgentSocket is the agent's enrollment socket; default contract.EnrollSocket.
	AgentSocket string `json:"agentSocket,omitempty"`
	// Timeout (a Go duration) bounds ADD and CHECK; default DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`
	// ExcludeNamespaces are passed through without asking the agent.
	ExcludeNamespaces []string `json:"excludeNamespaces,omitempty"`
	// NamespacesFile is the agent's namespace view (enroll.NamespaceView); default
	// contract.EnrollNamespacesFile.
	NamespacesFile string `json:"namespacesFile,omitempty"`

	timeout time.Duration
}

// parseConf decodes stdin and its prevResult. requirePrev: ADD and CHECK of a chained
// plugin need the main plugin's result.
func parseConf(stdin []byte, requirePrev bool) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(stdin, c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "svclb-cni: malformed network configuration", err.Error())
	}
	if err := version.ParsePrevResult(&c.PluginConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "svclb-cni: malformed prevResult", err.Error())
	}
	if requirePrev && c.PrevResult == nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			"svclb-cni: no prevResult: it must be chained after the plugin that sets up the pod's interface", "")
	}
	if c.AgentSocket == "" {
		c.AgentSocket = contract.EnrollSocket
	}
	if c.NamespacesFile == "" {
		c.NamespacesFile = contract.EnrollNamespacesFile
	}
	c.timeout = DefaultTimeout
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "svclb-cni: timeout must be a positive duration",
				fmt.Sprintf("timeout %q: %v", c.Timeout, err))
		}
		c.timeout = d
	}
	return c, nil
}

func (c *NetConf) excluded(namespace string) bool {
	return slices.Contains(c.ExcludeNamespaces, namespace)
}

// k8sArgs are the CNI_ARGS the kubelet's runtime passes (containerd, CRI-O).
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive,stylecheck // the runtime's spelling
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive,stylecheck
	K8S_POD_UID                types.UnmarshallableString //nolint:revive,stylecheck
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive,stylecheck
}

func parseArgs(s string) (*k8sArgs, error) {
	a := &k8sArgs{}
	if err := types.LoadArgs(s, a); err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "svclb-cni: malformed CNI_ARGS", err.Error())
	}
	return a, nil
}

// SupportedVersions are the CNI spec versions the plugin speaks: flannel's and kindnet's
// conflists say 0.3.1.
var SupportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}
