// Run: the agent's wiring, in named steps over the dependencies they build (as kind's
// actions share an ActionContext): clients, informers, syncer, handlers, HTTP, caches, the
// first snapshot, then the xDS and CNI servers.

package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/agent/internal/netnsfind"
	"github.com/aether-mesh/svclb/agent/internal/xdsserver"
	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/svcindex"
)

var everything = labels.Everything()

// deps is what Run's steps build, each step for the ones after it.
type deps struct {
	cfg Config
	log *slog.Logger

	// clients
	client kubernetes.Interface
	dyn    dynamic.Interface
	disco  discovery.DiscoveryInterface
	reg    *prometheus.Registry
	m      *metrics

	// informers: the cluster-wide factory (Services, EndpointSlices, Namespaces, the index's)
	// and the node-scoped ones (this node's pods, its Node, the agent ConfigMap)
	factories  []informers.SharedInformerFactory
	idx        *svcindex.Index
	services   coreinformers.ServiceInformer
	slices     cache.SharedIndexInformer
	pods       cache.SharedIndexInformer
	nodes      cache.SharedIndexInformer
	configMaps cache.SharedIndexInformer
	namespaces cache.SharedIndexInformer // nil: no CNI enrollment

	// syncer
	srv  *xdsserver.Server
	s    *syncer
	live *liveSettings

	// servers
	ready  atomic.Bool
	httpLn net.Listener // the HTTP listener, whose address Config.Ready is told
	errc   chan error   // a server that stopped
	undo   []func()     // run in reverse when Run returns
}

// step is one of Run's steps; its error is wrapped with its name.
type step struct {
	name string
	run  func(*deps, context.Context) error
}

var steps = []step{
	{"clients", (*deps).clients},
	{"informers", (*deps).informers},
	{"syncer", (*deps).syncer},
	{"event handlers", (*deps).handlers},
	{"http", (*deps).http},
	{"informer caches", (*deps).caches},
	{"first snapshot", (*deps).firstSnapshot},
	{"servers", (*deps).servers},
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	d := &deps{cfg: cfg, log: cfg.Logger, errc: make(chan error, 4)}
	defer func() {
		for i := len(d.undo) - 1; i >= 0; i-- {
			d.undo[i]()
		}
	}()
	for _, st := range steps {
		if err := st.run(d, ctx); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	go d.s.loop(ctx, d.idx.Changed, cfg.Debounce)
	go d.s.refuser.run(ctx, contract.RefuseCountEvery)
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.errc:
		return err
	}
}

// clients builds the Kubernetes clients and the metrics registry.
func (d *deps) clients(context.Context) error {
	restCfg := d.cfg.RestConfig
	if restCfg == nil {
		var err error
		if restCfg, err = restConfig(d.cfg.Kubeconfig); err != nil {
			return err
		}
	}
	var err error
	if d.client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if d.dyn, err = dynamic.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if d.disco, err = discovery.NewDiscoveryClientForConfig(restCfg); err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	d.reg = prometheus.NewRegistry()
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.m, err = newMetrics(d.reg)
	return err
}

// informers builds the Service index and the informers (not started yet).
func (d *deps) informers(context.Context) error {
	cfg := d.cfg
	factory := informers.NewSharedInformerFactory(d.client, 0)
	// What kube-proxy does not serve (another proxy's, headless by label) the agent does not either.
	svcindex.ProxiedOnly(factory)
	idx, err := svcindex.New(factory, d.dyn, d.disco, svcindex.Options{RangeOverride: cfg.RangeOverride, Logger: d.log})
	if err != nil {
		return fmt.Errorf("service index: %w", err)
	}
	nodeScoped := func(opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(d.client, 0, opts...)
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

	d.idx = idx
	d.factories = []informers.SharedInformerFactory{factory, podFactory, nodeFactory, cmFactory}
	d.services = factory.Core().V1().Services()
	d.slices = factory.Discovery().V1().EndpointSlices().Informer()
	if err := d.slices.AddIndexers(cache.Indexers{byServiceIndex: sliceIndex}); err != nil {
		return fmt.Errorf("endpointslice index: %w", err)
	}
	d.pods = podFactory.Core().V1().Pods().Informer()
	if err := d.pods.AddIndexers(cache.Indexers{byPodIPIndex: podIPIndex}); err != nil {
		return fmt.Errorf("pod index: %w", err)
	}
	d.nodes = nodeFactory.Core().V1().Nodes().Informer()
	d.configMaps = cmFactory.Core().V1().ConfigMaps().Informer()
	if cfg.EnrollSocket != "" {
		d.namespaces = factory.Core().V1().Namespaces().Informer()
	}
	return nil
}

// syncer builds the xDS server, the syncer it publishes to, the enrollment and the live
// settings.
func (d *deps) syncer(ctx context.Context) error {
	cfg := d.cfg
	srv, err := xdsserver.New(ctx, d.idx, d.reg, d.log)
	if err != nil {
		return err
	}
	s := newSyncer(d.log, srv, d.services.Lister(), d.slices.GetIndexer(), d.pods.GetStore(),
		&netnsfind.Scanner{Dir: cfg.NetnsDir}, d.idx, d.m, translate.Node{Name: cfg.NodeName}, cfg.Phase1, cfg.Phase2)
	s.configureDemand(cfg.CDSMode, cfg.OnDemandMax, cfg.DemandFile)
	if d.namespaces != nil {
		if s.enroll, err = newEnrollment(d.log, cfg.NodeName, d.pods.GetStore(), d.namespaces, cfg.EnrollFile, cfg.EnrollNamespacesFile, d.reg, s.listenersChanged); err != nil {
			return err
		}
	}
	srv.SetDemandHandler(s)
	srv.SetSources(podSources{pods: d.pods.GetIndexer()})
	s.refuser.add = srv.AddRefused
	// On the way out the pods' refuse tables go: a table nobody keeps would go on resetting
	// SYNs to a Service that gained endpoints (a restarted agent installs them again).
	d.undo = append(d.undo, s.refuser.close)
	d.srv, d.s = srv, s
	d.live = newLiveSettings(d.log, defaultSettings(cfg.Phase1, cfg.Phase2, cfg.CDSMode), s.applySettings)
	return nil
}

// nodeChanged hands the syncer what the agent's Node says.
func (d *deps) nodeChanged(o any) {
	d.s.setNode(nodeOf(d.cfg.NodeName, unwrap(o)))
	if addrs, ok := nodeAddrsOf(d.cfg.NodeName, unwrap(o)); ok {
		d.s.setNodeAddrs(addrs)
	}
}

// settingsChanged reads the agent ConfigMap o.
func (d *deps) settingsChanged(o any) { d.live.read(unwrap(o)) }

// handlers wires the informers to the syncer.
func (d *deps) handlers(context.Context) error {
	s := d.s
	handlers := []struct {
		inf         cache.SharedIndexInformer
		set, delete func(any)
	}{
		{d.services.Informer(), s.serviceChanged, s.serviceChanged},
		{d.slices, s.sliceChanged, s.sliceChanged},
		{d.pods, func(any) { s.listenersChanged() }, func(any) { s.listenersChanged() }},
		// Without its Node the agent has no zone (its addresses stay refused: they were the
		// node's); without the ConfigMap the defaults decide.
		{d.nodes, d.nodeChanged, func(any) { s.setNode(translate.Node{Name: d.cfg.NodeName}) }},
		{d.configMaps, d.settingsChanged, func(any) { d.live.read(nil) }},
	}
	for _, h := range handlers {
		_, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: h.set, UpdateFunc: func(_, o any) { h.set(o) }, DeleteFunc: h.delete,
		})
		if err != nil {
			return fmt.Errorf("event handler: %w", err)
		}
	}
	return nil
}

// http serves /metrics, /healthz and /status from now on: /healthz says 503 until the servers
// step.
func (d *deps) http(ctx context.Context) error {
	ln, err := httpserve.Listen(d.cfg.HTTPAddr, httpserve.Defaults())
	if err != nil {
		return err
	}
	d.httpLn = ln
	httpCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.errc <- httpserve.Serve(httpCtx, d.s.handler(d.reg, d.ready.Load), httpserve.Defaults(), ln)
	}()
	d.undo = append(d.undo, func() { stop(); <-done })
	return nil
}

// caches starts the informers and the index and waits until their caches have synced.
func (d *deps) caches(ctx context.Context) error {
	for _, f := range d.factories {
		f.Start(ctx.Done())
	}
	go func() { _ = d.idx.Run(ctx) }()
	d.log.Info("waiting for informer caches", "node", d.cfg.NodeName)
	synced := []cache.InformerSynced{d.idx.HasSynced, d.slices.HasSynced, d.pods.HasSynced, d.nodes.HasSynced, d.configMaps.HasSynced}
	if d.namespaces != nil {
		synced = append(synced, d.namespaces.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	return nil
}

// firstSnapshot builds the first snapshot from the synced caches, before the xDS socket opens:
// a restarted agent never hands the proxy an empty configuration.
func (d *deps) firstSnapshot(ctx context.Context) error {
	s := d.s
	// The informers' handlers may still be delivering the initial list: read the ConfigMap and
	// the Node from the synced stores, so the first snapshot already has their phases, CDS mode
	// and zone (the handlers then find nothing changed).
	if o, ok, _ := d.configMaps.GetStore().GetByKey(contract.Namespace + "/" + contract.AgentConfigMap); ok {
		d.settingsChanged(o)
	}
	d.live.startedUp()
	if o, ok, _ := d.nodes.GetStore().GetByKey(d.cfg.NodeName); ok {
		d.nodeChanged(o)
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
		return err
	}
	st := s.status.Load()
	d.log.Info("first snapshot built", "clusters", st.Clusters, "endpoints", st.Endpoints, "listeners", len(st.Listeners), "zone", st.Zone,
		"cds", st.CDS, "demanded", st.Demanded)
	return nil
}

// servers opens the xDS socket and, with enrollment, the CNI plugin's; then the agent is
// ready.
func (d *deps) servers(ctx context.Context) error {
	cfg := d.cfg
	ln, err := xdsserver.Listen(cfg.XDSSocket)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	d.srv.Register(g)
	go func() { d.errc <- g.Serve(ln) }()
	d.undo = append(d.undo, g.Stop)
	if d.s.enroll != nil {
		// After the first snapshot: a plugin's ADD is answered by a syncer that runs.
		eln, err := enroll.Listen(cfg.EnrollSocket)
		if err != nil {
			return err
		}
		go func() { d.errc <- enroll.Serve(ctx, eln, d.s.enroll, d.log) }()
		d.log.Info("serving the CNI plugin", "socket", cfg.EnrollSocket)
	}
	d.ready.Store(true)
	d.log.Info("serving xDS and ALS", "socket", cfg.XDSSocket, "http", d.httpLn.Addr().String())
	if cfg.Ready != nil {
		cfg.Ready(d.httpLn.Addr())
	}
	return nil
}
