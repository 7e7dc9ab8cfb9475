package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aether-mesh/svclb/e2e/perf/internal/connload"
)

func load(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	mode := fs.String("mode", "", "open, closed or bulk")
	var o connload.Options
	fs.StringVar(&o.To, "to", "", "host:port of an echo server")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Second, "per connection (bulk: on top of -duration)")
	rate := fs.Float64("rate", 500, "open: connections per second")
	n := fs.Int("n", 10000, "open: connections; closed: at most this many")
	concurrency := fs.Int("concurrency", 8, "closed: workers")
	streams := fs.Int("streams", 1, "bulk: connections")
	duration := fs.Duration("duration", 5*time.Second, "closed, bulk: how long")
	_ = fs.Parse(args)
	var res any
	var err error
	switch *mode {
	case "open":
		res, err = connload.Open(ctx, connload.OpenOptions{Options: o, Rate: *rate, N: *n})
	case "closed":
		res, err = connload.Closed(ctx, connload.ClosedOptions{Options: o, Concurrency: *concurrency, Duration: *duration, N: *n})
	case "bulk":
		res, err = connload.Bulk(ctx, connload.BulkOptions{Options: o, Streams: *streams, Duration: *duration})
	default:
		return fmt.Errorf("load: mode %q: want open, closed or bulk", *mode)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
