// Command svclb-echo is the suite's backend and client image:
//
//	svclb-echo serve --listen :8080 --health :8081 --delay-shutdown 30s
//	svclb-echo dial --to 10.96.0.10:80 --count 10 --interval 100ms --timeout 2s
//	svclb-echo until-reply --to 10.96.0.10:80 --within 60s --interval 100ms --timeout 1s
//	svclb-echo lookup --name web.ns.svc.cluster.local. --net udp|tcp --count 5
//	svclb-echo tls --to 10.96.0.1:443 --server-name kubernetes.default.svc --ca /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
//	svclb-echo load --target a=web.ns.svc.cluster.local.:80 --rate 5 --long 1 --duration 10m
//	svclb-echo sweep --to 10.96.0.10:80,10.96.0.11:80 --count 2 | --prefix 10.96.0.0/16 --hosts 1024 --ports 80,443 --parallel 256
//	svclb-echo steer --to 127.0.0.1:9901,169.254.169.254:80   # needs NET_ADMIN: steer the pod's own capture (fixtures/capture Steer)
//	svclb-echo blackhole --port 8080   # needs NET_ADMIN: drop TCP to the port in the pod's netns (fixtures/echo Blackhole)
//	svclb-echo idle   # keeps a client pod up (the image has no shell)
package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/internal/httpserve"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: svclb-echo serve|dial|until-reply|lookup|tls|load|sweep|steer|blackhole|idle [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serve(ctx, args, log)
	case "dial":
		err = dial(ctx, args)
	case "until-reply":
		err = untilReply(ctx, args)
	case "lookup":
		err = lookup(ctx, args)
	case "tls":
		err = handshake(ctx, args)
	case "load":
		err = load(ctx, args)
	case "sweep":
		err = sweep(ctx, args)
	case "steer":
		err = steer(args)
	case "blackhole":
		err = blackhole(args)
	case "idle", "sleep":
		<-ctx.Done()
	default:
		err = fmt.Errorf("unknown command %q (want serve, dial, until-reply, lookup, tls, load, sweep, steer, blackhole or idle)", cmd)
	}
	if err != nil {
		log.Error("svclb-echo", "err", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", ":8080", "echo TCP address")
	port := fs.Int("port", 0, "echo TCP port (shorthand for -listen=:PORT)")
	health := fs.String("health", ":8081", "HTTP /healthz address (empty: none)")
	delay := fs.Duration("delay-shutdown", 0, "after SIGTERM, fail readiness but keep serving this long")
	fs.Parse(args)
	if *port != 0 {
		*listen = net.JoinHostPort("", strconv.Itoa(*port))
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	var hl net.Listener
	if *health != "" {
		if hl, err = httpserve.Listen(*health, httpserve.Defaults()); err != nil {
			return err
		}
	}
	s := &echo.Server{
		Identity: echo.Identity{
			Pod: os.Getenv("POD_NAME"), Node: os.Getenv("NODE_NAME"),
			Zone: os.Getenv("ZONE"), PodIP: os.Getenv("POD_IP"),
		},
		DelayShutdown: *delay,
		Log:           log,
	}
	log.Info("serving", "listen", ln.Addr(), "health", *health, "pod", s.Identity.Pod)
	return s.Serve(ctx, ln, hl)
}

func dial(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dial", flag.ExitOnError)
	var o echo.DialOptions
	fs.StringVar(&o.To, "to", "", "host:port to dial")
	fs.IntVar(&o.Count, "count", 1, "attempts")
	fs.DurationVar(&o.Interval, "interval", 100*time.Millisecond, "between attempt starts")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Second, "per attempt")
	fs.Parse(args)
	enc := json.NewEncoder(os.Stdout)
	return echo.Dial(ctx, o, func(r echo.Result) {
		if err := enc.Encode(r); err != nil {
			slog.Error("writing a result", "error", err)
		}
	})
}

// printer prints each result as one JSON line.
func printer[R any]() func(R) {
	enc := json.NewEncoder(os.Stdout)
	return func(r R) {
		if err := enc.Encode(r); err != nil {
			slog.Error("writing a result", "error", err)
		}
	}
}

func untilReply(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("until-reply", flag.ExitOnError)
	var o echo.DialOptions
	fs.StringVar(&o.To, "to", "", "host:port to dial")
	within := fs.Duration("within", time.Minute, "give up after")
	fs.DurationVar(&o.Interval, "interval", 100*time.Millisecond, "between attempt starts")
	fs.DurationVar(&o.Timeout, "timeout", time.Second, "per attempt")
	fs.Parse(args)
	return echo.DialUntilReply(ctx, o, *within, printer[echo.Timed]())
}

func lookup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lookup", flag.ExitOnError)
	var o echo.LookupOptions
	fs.StringVar(&o.Name, "name", "", "name to resolve (end it with a dot: no search list)")
	fs.StringVar(&o.Network, "net", "udp", "DNS transport: udp or tcp")
	fs.IntVar(&o.Count, "count", 1, "attempts")
	fs.DurationVar(&o.Interval, "interval", 100*time.Millisecond, "between attempt starts")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "per attempt")
	fs.StringVar(&o.Server, "server", "", "host:port instead of resolv.conf's nameservers")
	fs.Parse(args)
	return echo.Lookup(ctx, o, printer[echo.LookupResult]())
}

func handshake(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tls", flag.ExitOnError)
	var o echo.HandshakeOptions
	fs.StringVar(&o.To, "to", "", "host:port to dial")
	fs.StringVar(&o.ServerName, "server-name", "", "name the server's certificate must carry")
	ca := fs.String("ca", "", "PEM file of the certificates that may sign it")
	fs.IntVar(&o.Count, "count", 1, "attempts")
	fs.DurationVar(&o.Interval, "interval", 100*time.Millisecond, "between attempt starts")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "per attempt")
	fs.Parse(args)
	pem, err := os.ReadFile(*ca)
	if err != nil {
		return fmt.Errorf("tls: -ca: %w", err)
	}
	o.Roots = x509.NewCertPool()
	if !o.Roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("tls: -ca %s: no certificate", *ca)
	}
	return echo.Handshake(ctx, o, printer[echo.HandshakeResult]())
}
