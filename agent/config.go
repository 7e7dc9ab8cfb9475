// Config: the agent's configuration and its defaults.

package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// Config is the agent's configuration; zero values take the defaults noted.
type Config struct {
	NodeName      string         // required: the node this agent serves
	Kubeconfig    string         // empty: in-cluster
	RestConfig    *rest.Config   // when set, used instead of Kubeconfig
	XDSSocket     string         // default contract.XDSSocket
	HTTPAddr      string         // default 127.0.0.1:contract.AgentPort; port 0 picks a free one (see Ready)
	NetnsDir      string         // default /var/run/netns
	Phase1        bool           // default until the ConfigMap says otherwise
	Phase2        bool           // default until the ConfigMap says otherwise
	RangeOverride []netip.Prefix // replaces the ServiceCIDR range when set
	Debounce      time.Duration  // default 50ms: a burst of events makes one push
	// CDSMode is the default CDS mode until the ConfigMap's "cds" key says otherwise
	// (default proactive).
	CDSMode     agentstatus.CDSMode
	OnDemandMax int    // default DefaultOnDemandMax: cap on the admitted on-demand names
	DemandFile  string // where the admitted names persist across restarts; empty: nowhere
	Logger      *slog.Logger
	// Ready, when set, is called once the agent serves: the first snapshot is built and the
	// xDS socket is open (/healthz turns 200). httpAddr is the address HTTP was bound to,
	// the one to use when HTTPAddr's port is 0. It must not block.
	Ready func(httpAddr net.Addr)
	// EnrollSocket serves the CNI plugin (enrollment.go); empty: no CNI enrollment, and only
	// pods labelled contract.CapturedLabel are captured.
	EnrollSocket string
	EnrollFile   string // where the CNI-enrolled pods persist across restarts; empty: nowhere
	// EnrollNamespacesFile is where the agent publishes which namespaces its selector enrolls
	// (namespaceview.go), so the plugin starts the pods of the others without it; empty: not
	// published, and the plugin asks the agent about every pod.
	EnrollNamespacesFile string
}

func (c *Config) defaults() error {
	if c.NodeName == "" {
		return errors.New("node name is required")
	}
	if c.XDSSocket == "" {
		c.XDSSocket = contract.XDSSocket
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = httpserve.LoopbackAddr(contract.AgentPort)
	}
	if c.NetnsDir == "" {
		c.NetnsDir = contract.NetnsDir
	}
	if c.Debounce == 0 {
		c.Debounce = 50 * time.Millisecond
	}
	if c.CDSMode == "" {
		c.CDSMode = agentstatus.CDSProactive
	}
	if _, err := ParseCDSMode(string(c.CDSMode)); err != nil {
		return err
	}
	if c.OnDemandMax == 0 {
		c.OnDemandMax = DefaultOnDemandMax
	}
	if c.OnDemandMax < 0 {
		return fmt.Errorf("on-demand max %d: must be positive", c.OnDemandMax)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (set a kubeconfig outside a pod): %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}
