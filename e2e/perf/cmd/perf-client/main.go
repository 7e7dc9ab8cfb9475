// Command perf-client is the perf suite's client image (svclb/perf-client:dev,
// built and kind-loaded by e2e/perf/perf.mk): svclb-echo's client with the one
// subcommands it lacks, dialling on a fixed schedule and the data-plane load.
//
//	perf-client dial-every --to 10.96.0.10:80 --interval 10ms --timeout 1s --within 5m [--until-reply]
//	perf-client load --mode open --to 10.96.0.10:80 --rate 500 --n 10000
//	perf-client load --mode closed --to 10.96.0.10:80 --concurrency 8 --duration 5s --n 10000
//	perf-client load --mode bulk --to 10.96.0.10:80 --streams 8 --duration 5s
//	perf-client tcpstat
//	perf-client idle
//
// dial-every prints one echo.Timed JSON line per attempt as it ends
// (echo.DialEvery); --until-reply stops at the first reply. It exits when a
// line cannot be written for stuckWrite: the suite ends a client by ending
// its exec, and the container runtime may leave the process with a pipe
// nobody reads, where every attempt would wait to print, forever.
//
// load runs one e2e/perf/internal/connload mode and prints its result as one
// JSON document. tcpstat prints the pod netns's TCP counters
// (e2e/perf/internal/tcpstat) as one JSON object.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aether-mesh/svclb/e2e/perf/internal/tcpstat"
	"github.com/aether-mesh/svclb/fixtures/echo"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: perf-client dial-every|load|tcpstat|idle [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "dial-every":
		err = dialEvery(ctx, args)
	case "load":
		err = load(ctx, args)
	case "tcpstat":
		var c tcpstat.Counters
		if c, err = tcpstat.Read(); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(c)
		}
	case "idle":
		<-ctx.Done()
	default:
		err = fmt.Errorf("unknown command %q (want dial-every, load, tcpstat or idle)", cmd)
	}
	if err != nil {
		slog.Error("perf-client", "err", err)
		os.Exit(1)
	}
}

// stuckWrite is how long a line may take to write before the reader is
// taken to be gone.
const stuckWrite = 10 * time.Second

func dialEvery(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dial-every", flag.ExitOnError)
	var o echo.DialOptions
	fs.StringVar(&o.To, "to", "", "host:port to dial")
	fs.DurationVar(&o.Interval, "interval", 10*time.Millisecond, "between attempt starts")
	fs.DurationVar(&o.Timeout, "timeout", time.Second, "per attempt")
	within := fs.Duration("within", time.Minute, "stop starting attempts after")
	untilReply := fs.Bool("until-reply", false, "stop at the first reply")
	_ = fs.Parse(args)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enc := json.NewEncoder(os.Stdout)
	var writing atomic.Int64 // when the line being written started (unix ns), 0 between lines
	go func() {
		for range time.Tick(time.Second) {
			if w := writing.Load(); w != 0 && time.Since(time.Unix(0, w)) > stuckWrite {
				slog.Info("perf-client: nobody reads the results any more, exiting")
				os.Exit(0)
			}
		}
	}()
	err := echo.DialEvery(ctx, o, *within, func(r echo.Timed) {
		writing.Store(time.Now().UnixNano())
		err := enc.Encode(r)
		writing.Store(0)
		if err != nil {
			// The reader went away (the suite ended its exec): stop.
			cancel()
		}
		if r.OK && *untilReply {
			cancel()
		}
	})
	if ctx.Err() != nil && err != nil {
		return nil // stopped on purpose
	}
	return err
}
