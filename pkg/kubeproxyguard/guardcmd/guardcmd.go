package guardcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/internal/loopget"
	"github.com/aether-mesh/svclb/internal/nsselector"
	"github.com/aether-mesh/svclb/pkg/contract"
	"github.com/aether-mesh/svclb/pkg/kubeproxyguard"
)

// DefaultListen is the address of /status, /metrics and /healthz when -listen is not given:
// loopback (httpserve.LoopbackAddr), as kube-proxy's metrics. On hostNetwork every other
// address is the node's, which every pod reaches; `svclb-guard get` reads it in the container.
var DefaultListen = httpserve.LoopbackAddr(contract.GuardPort)

var usage = `usage: svclb-guard <command> [flags]

commands:
  run     guard the Services labelled ` + kubeproxyguard.Selector.String() + ` and every Service of the namespaces
          the agent enrolls (its ConfigMap's namespace selector; -namespace-selector overrides it)
          (DaemonSet mode; node name from NODE_NAME)
  list    print the Services that have ClusterIP entries in table ip kube-proxy (on path, or "cut" by the guard)
  delete  NS/NAME...  cut their kube-proxy ClusterIP entries once (verdict continue)
  watch   NS/NAME...  keep them cut until interrupted (no apiserver)
  get     PATH        write the body of PATH (/status, /metrics, /healthz) of this node's guard

Run "svclb-guard <command> -h" for a command's flags.
`

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "get" { // loopget prints its own errors and picks the exit code
		return loopget.Main(ctx, "svclb-guard", DefaultListen, args[1:], stdout, stderr)
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"run": run, "list": list, "delete": deleteCmd, "watch": watch,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		if args[0] != "-h" && args[0] != "--help" && args[0] != "help" {
			fmt.Fprintf(stderr, "svclb-guard: unknown command %q\n", args[0])
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err := cmd(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "svclb-guard %s: %v\n", args[0], err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("svclb-guard "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := fs.Bool("v", false, "debug logs")
	return fs, v
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}

func logger(stderr io.Writer, debug bool) *slog.Logger {
	lvl := slog.LevelInfo
	if debug {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
}

// parseServices reads NS/NAME arguments.
func parseServices(args []string) ([]types.NamespacedName, error) {
	if len(args) == 0 {
		return nil, usageError{errors.New("name at least one Service as NS/NAME")}
	}
	var r []types.NamespacedName
	for _, a := range args {
		ns, name, ok := strings.Cut(a, "/")
		if !ok || strings.Contains(name, "/") {
			return nil, usageError{fmt.Errorf("%q: want NAMESPACE/NAME", a)}
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, usageError{fmt.Errorf("%q: namespace: %s", a, strings.Join(errs, "; "))}
		}
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			return nil, usageError{fmt.Errorf("%q: Service name: %s", a, strings.Join(errs, "; "))}
		}
		svc := types.NamespacedName{Namespace: ns, Name: name}
		if why := kubeproxyguard.Refuse(svc); why != "" {
			return nil, usageError{fmt.Errorf("%q: refusing: %s", a, why)}
		}
		r = append(r, svc)
	}
	return r, nil
}

func run(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs, v := newFlags("run", stderr)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: in-cluster config)")
	listen := fs.String("listen", DefaultListen, "address of /status, /metrics and /healthz; any but loopback lets every pod that reaches it read them")
	resync := fs.Duration("resync", time.Second, "period of the full reconcile behind the nft monitor")
	node := fs.String("node", os.Getenv("NODE_NAME"), "this node's name (reported in /status)")
	nsSelector := fs.String("namespace-selector", "",
		"override the agent's namespace selector (ConfigMap "+contract.Namespace+"/"+contract.AgentConfigMap+", key "+contract.KeyNamespaceSelector+
			"), which the guard otherwise follows; kubectl syntax, not empty. Without it the guard chooses the Services of the namespaces the agent enrolls, as the agent reads its ConfigMap")
	cut := fs.String("cut", contract.GuardCutAll, "how the chosen Services are cut: "+contract.GuardCutAll+
		" (kube-proxy's ClusterIP entries overwritten: every client that is not meshed meets kube-proxy's REJECT) or "+contract.GuardCutProxy+
		" (only the node proxy's connections, SO_MARK "+fmt.Sprintf("%#x", contract.ProxyUpstreamMark)+", are reset, in table ip "+contract.GuardTable+"; everyone else keeps kube-proxy)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *cut != contract.GuardCutAll && *cut != contract.GuardCutProxy {
		return usageError{fmt.Errorf("-cut %q: want %s or %s", *cut, contract.GuardCutAll, contract.GuardCutProxy)}
	}
	sel, err := namespaceSelection(fs, *nsSelector)
	if err != nil {
		return err
	}
	log := logger(stderr, *v)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	g, err := kubeproxyguard.New(kubeproxyguard.Options{NodeName: *node, Resync: *resync, Logger: log, RestoreUnchosen: true, Cut: *cut})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- serve(ctx, *listen, g.Handler(), log) }()
	go func() { errc <- g.Run(ctx) }()
	go func() { errc <- kubeproxyguard.WatchServicesByNamespace(ctx, client, sel, g) }()
	log.Info("svclb-guard running", "cut", *cut, "node", *node, "listen", *listen, "selector", kubeproxyguard.Selector.String(), "namespaceSelector", describeSelection(sel))
	err = <-errc // the first to end ends all
	cancel()
	for range 2 {
		err = errors.Join(err, <-errc)
	}
	return err
}

// namespaceSelection reads -namespace-selector: not given, the agent's ConfigMap decides; given,
// it overrides it. An empty one is refused: to the agent "" selects every namespace, to
// earlier guards it meant none, and an override must not be read two ways.
func namespaceSelection(fs *flag.FlagSet, s string) (kubeproxyguard.NamespaceSelection, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "namespace-selector" })
	if !given {
		return kubeproxyguard.NamespaceSelection{}, nil
	}
	if strings.TrimSpace(s) == "" {
		return kubeproxyguard.NamespaceSelection{}, usageError{fmt.Errorf("-namespace-selector %q: an empty selector selects every namespace (the agent's reading); omit the flag to follow the agent's ConfigMap", s)}
	}
	sel, err := nsselector.Parse(s)
	if err != nil {
		return kubeproxyguard.NamespaceSelection{}, usageError{fmt.Errorf("-namespace-selector %q: %w", s, err)}
	}
	return kubeproxyguard.NamespaceSelection{Override: &sel}, nil
}

// describeSelection is the selection for the start-up log line.
func describeSelection(sel kubeproxyguard.NamespaceSelection) string {
	if sel.Override != nil {
		return sel.Override.Text + " (--namespace-selector)"
	}
	return "the agent's (ConfigMap " + contract.Namespace + "/" + contract.AgentConfigMap + ")"
}

// serve serves h on addr until ctx ends ("" serves nothing), with the limits every svclb
// server has (internal/httpserve).
func serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	lim := httpserve.Defaults()
	l, err := httpserve.Listen(addr, lim)
	if err != nil {
		return err
	}
	log.Info("serving status", "addr", l.Addr().String())
	return httpserve.Serve(ctx, h, lim, l)
}

func list(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs, _ := newFlags("list", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	svcs, err := kubeproxyguard.List(0)
	if err != nil {
		return err
	}
	if *asJSON {
		type entry struct {
			Namespace string                     `json:"namespace"`
			Name      string                     `json:"name"`
			Objects   []kubeproxyguard.ObjectRef `json:"objects"`
			Cut       []kubeproxyguard.ObjectRef `json:"cut"`
		}
		out := []entry{}
		for _, s := range svcs {
			out = append(out, entry{s.Service.Namespace, s.Service.Name, nonNil(s.Objects), nonNil(s.Cut)})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, s := range svcs {
		fmt.Fprintln(stdout, s.Service)
		for _, o := range s.Objects {
			fmt.Fprintf(stdout, "  %-7s  %s\n", o.Kind, o.Name)
		}
		for _, o := range s.Cut {
			fmt.Fprintf(stdout, "  %-7s  %s\n", "cut", o.Name)
		}
	}
	return nil
}

// nonNil prints an empty list as [] in JSON.
func nonNil(r []kubeproxyguard.ObjectRef) []kubeproxyguard.ObjectRef {
	if r == nil {
		return []kubeproxyguard.ObjectRef{}
	}
	return r
}

func deleteCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, v := newFlags("delete", stderr)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	svcs, err := parseServices(fs.Args())
	if err != nil {
		return err
	}
	g, err := kubeproxyguard.New(kubeproxyguard.Options{Logger: logger(stderr, *v)})
	if err != nil {
		return err
	}
	g.SetServices(svcs)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	err = g.DeleteNow(ctx)
	for _, s := range g.Status().Services {
		fmt.Fprintf(stdout, "%s/%s: %s, %d ClusterIP entries cut\n", s.Namespace, s.Name, s.State, len(s.Deleted))
		for _, o := range s.Deleted {
			fmt.Fprintf(stdout, "  %-7s  %s\n", o.Kind, o.Name)
		}
	}
	return err
}

func watch(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs, v := newFlags("watch", stderr)
	listen := fs.String("listen", "", "serve /status, /metrics and /healthz on this address")
	resync := fs.Duration("resync", time.Second, "period of the full reconcile behind the nft monitor")
	if err := parse(fs, args); err != nil {
		return err
	}
	svcs, err := parseServices(fs.Args())
	if err != nil {
		return err
	}
	log := logger(stderr, *v)
	g, err := kubeproxyguard.New(kubeproxyguard.Options{Resync: *resync, Logger: log})
	if err != nil {
		return err
	}
	g.SetServices(svcs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, *listen, g.Handler(), log) }()
	err = g.Run(ctx)
	cancel()
	return errors.Join(err, <-errc)
}
