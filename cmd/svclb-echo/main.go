// Command svclb-echo is the suite's backend and client image:
//
//	svclb-echo serve --listen :8080 --health :8081 --delay-shutdown 30s
//	svclb-echo dial --to 10.96.0.10:80 --count 10 --interval 100ms --timeout 2s
//	svclb-echo idle   # keeps a client pod up (the image has no shell)
package main

import (
	"context"
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
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: svclb-echo serve|dial|idle [flags]")
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
	case "idle", "sleep":
		<-ctx.Done()
	default:
		err = fmt.Errorf("unknown command %q (want serve, dial or idle)", cmd)
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
		if hl, err = net.Listen("tcp", *health); err != nil {
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
