// Run: the agent's configuration and wiring (clients, informers, syncer, xDS and HTTP servers).

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aether-mesh/svclb/agent/internal/netnsfind"
	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

var everything = labels.Everything()

// Config is the agent's configuration; zero values take the defaults noted.
type Config struct {
	NodeName      string         // required: the node this agent serves
	Kubeconfig    string         // empty: in-cluster
	RestConfig    *rest.Config   // when set, used instead of Kubeconfig
	XDSSocket     string         // default contract.XDSSocket
	HTTPAddr      string         // default 127.0.0.1:contract.AgentPort; port 0 picks a free one (see Ready)
	HTTPLocalAddr string         // a second address serving the same (the DaemonSet: 127.0.0.1, for the node's own readers); empty or HTTPAddr: none
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
		c.HTTPAddr = httpserve.PodAddr("", contract.AgentPort)
	}
	if c.HTTPLocalAddr == c.HTTPAddr {
		c.HTTPLocalAddr = ""
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

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	log := cfg.Logger
	restCfg := cfg.RestConfig
	if restCfg == nil {
		var err error
		if restCfg, err = restConfig(cfg.Kubeconfig); err != nil {
			return err
		}
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := newMetrics(reg)
	if err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	// What kube-proxy does not serve (another proxy's, headless by label) the agent does not either.
	svcindex.ProxiedOnly(factory)
	idx, err := svcindex.New(factory, dyn, disco, svcindex.Options{RangeOverride: cfg.RangeOverride, Logger: log})
	if err != nil {
		return fmt.Errorf("service index: %w", err)
	}
	nodeScoped := func(opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	}
	podFactory := nodeScoped(informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		if cfg.EnrollSocket == "" { // with enrollment, any pod on the node may be enrolled
			o.LabelSelector = contract.CapturedLabel + "=true"
		}
	}))
	nodeFactory := nodeScoped(informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	}))
	cmFactory := nodeScoped(informers.WithNamespace(contract.Namespace), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", contract.AgentConfigMap).String()
	}))

	services := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	if err := sliceInf.AddIndexers(cache.Indexers{byServiceIndex: sliceIndex}); err != nil {
		return fmt.Errorf("endpointslice index: %w", err)
	}
	podInf := podFactory.Core().V1().Pods().Informer()
	nodeInf := nodeFactory.Core().V1().Nodes().Informer()
	cmInf := cmFactory.Core().V1().ConfigMaps().Informer()

	srv, err := xdsserver.New(ctx, idx, reg, log)
	if err != nil {
		return err
	}
	s := newSyncer(log, srv, services.Lister(), sliceInf.GetIndexer(), podInf.GetStore(),
		&netnsfind.Scanner{Dir: cfg.NetnsDir}, idx, m, translate.Node{Name: cfg.NodeName}, cfg.Phase1, cfg.Phase2)
	s.configureDemand(cfg.CDSMode, cfg.OnDemandMax, cfg.DemandFile)
	var nsInf cache.SharedIndexInformer
	if cfg.EnrollSocket != "" {
		nsInf = factory.Core().V1().Namespaces().Informer()
		if s.enroll, err = newEnrollment(log, cfg.NodeName, podInf.GetStore(), nsInf, cfg.EnrollFile, cfg.EnrollNamespacesFile, reg, s.listenersChanged); err != nil {
			return err
		}
	}
	srv.SetDemandHandler(s)

	node := func(o any) {
		s.setNode(nodeOf(cfg.NodeName, unwrap(o)))
		if addrs, ok := nodeAddrsOf(cfg.NodeName, unwrap(o)); ok {
			s.setNodeAddrs(addrs)
		}
	}
	live := newLiveSettings(log, defaultSettings(cfg.Phase1, cfg.Phase2, cfg.CDSMode), s.applySettings)
	settings := func(o any) { live.read(unwrap(o)) }
	handlers := []struct {
		inf         cache.SharedIndexInformer
		set, delete func(any)
	}{
		{services.Informer(), s.serviceChanged, s.serviceChanged},
		{sliceInf, s.sliceChanged, s.sliceChanged},
		{podInf, func(any) { s.listenersChanged() }, func(any) { s.listenersChanged() }},
		// Without its Node the agent has no zone (its addresses stay refused: they were the
		// node's); without the ConfigMap the defaults decide.
		{nodeInf, node, func(any) { s.setNode(translate.Node{Name: cfg.NodeName}) }},
		{cmInf, settings, func(any) { live.read(nil) }},
	}
	for _, h := range handlers {
		_, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: h.set, UpdateFunc: func(_, o any) { h.set(o) }, DeleteFunc: h.delete,
		})
		if err != nil {
			return fmt.Errorf("event handler: %w", err)
		}
	}

	var ready atomic.Bool
	httpLns, err := listenHTTP(cfg.HTTPAddr, cfg.HTTPLocalAddr)
	if err != nil {
		return err
	}
	httpLn := httpLns[0]
	httpCtx, stopHTTP := context.WithCancel(ctx)
	httpDone := make(chan struct{})
	errc := make(chan error, 4)
	go func() {
		defer close(httpDone)
		errc <- httpserve.Serve(httpCtx, s.handler(reg, ready.Load), httpserve.Defaults(), httpLns...)
	}()
	defer func() { stopHTTP(); <-httpDone }()

	for _, f := range []informers.SharedInformerFactory{factory, podFactory, nodeFactory, cmFactory} {
		f.Start(ctx.Done())
	}
	go func() { _ = idx.Run(ctx) }()
	log.Info("waiting for informer caches", "node", cfg.NodeName)
	synced := []cache.InformerSynced{idx.HasSynced, sliceInf.HasSynced, podInf.HasSynced, nodeInf.HasSynced, cmInf.HasSynced}
	if nsInf != nil {
		synced = append(synced, nsInf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	// The informers' handlers may still be delivering the initial list: read the ConfigMap and
	// the Node from the synced stores, so the first snapshot already has their phases, CDS mode
	// and zone (the handlers then find nothing changed).
	if o, ok, _ := cmInf.GetStore().GetByKey(contract.Namespace + "/" + contract.AgentConfigMap); ok {
		settings(o)
	}
	live.startedUp()
	if o, ok, _ := nodeInf.GetStore().GetByKey(cfg.NodeName); ok {
		node(o)
	}
	// Restored names are re-classified against the synced index and published in the first
	// snapshot, so a restarted agent or proxy does not make every first connection wait.
	s.restoreDemand()
	if s.enroll != nil {
		s.enroll.restore()
		// Before the socket opens: the view the plugin reads is this run's by then.
		s.enroll.publishView(ctx)
	}
	if err := s.sync(); err != nil {
		return fmt.Errorf("first snapshot: %w", err)
	}
	st := s.status.Load()
	log.Info("first snapshot built", "clusters", st.Clusters, "endpoints", st.Endpoints, "listeners", len(st.Listeners), "zone", st.Zone,
		"cds", st.CDS, "demanded", st.Demanded)

	ln, err := xdsserver.Listen(cfg.XDSSocket)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	srv.Register(g)
	go func() { errc <- g.Serve(ln) }()
	defer g.Stop()
	if s.enroll != nil {
		// After the first snapshot: a plugin's ADD is answered by a syncer that runs.
		eln, err := enroll.Listen(cfg.EnrollSocket)
		if err != nil {
			return err
		}
		go func() { errc <- enroll.Serve(ctx, eln, s.enroll, log) }()
		log.Info("serving the CNI plugin", "socket", cfg.EnrollSocket)
	}
	ready.Store(true)
	log.Info("serving xDS and ALS", "socket", cfg.XDSSocket, "http", httpLn.Addr().String(), "httpLocal", cfg.HTTPLocalAddr)
	if cfg.Ready != nil {
		cfg.Ready(httpLn.Addr())
	}

	go s.loop(ctx, idx.Changed, cfg.Debounce)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
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

// listenHTTP opens the HTTP listeners, addr's first, each capped at the contract's
// connection limit (internal/httpserve); an empty local opens none for it.
func listenHTTP(addr, local string) ([]net.Listener, error) {
	var lns []net.Listener
	for _, a := range []string{addr, local} {
		if a == "" {
			continue
		}
		ln, err := httpserve.Listen(a, httpserve.Defaults())
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("http: %w", err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}
