package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// targetsFlag is a repeatable -target name=host:port.
type targetsFlag []echo.LoadTarget

func (t *targetsFlag) String() string { return fmt.Sprint(*t) }

func (t *targetsFlag) Set(s string) error {
	name, addr, ok := strings.Cut(s, "=")
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("want name=host:port, got %q", s)
	}
	*t = append(*t, echo.LoadTarget{Name: name, Addr: addr})
	return nil
}

// load is `svclb-echo load`: a steady load (fixtures/echo Load) printed as
// JSON lines; after it stops, the process idles, so a pod running it as
// its main container is not restarted and its log stays readable.
func load(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	var o echo.LoadOptions
	var ts targetsFlag
	fs.Var(&ts, "target", "name=host:port (repeatable); a DNS host is re-resolved every -resolve-every")
	fs.Float64Var(&o.Rate, "rate", 5, "new connections per second to each target")
	fs.IntVar(&o.Long, "long", 1, "long-lived connections to each target")
	fs.IntVar(&o.Chunk, "chunk", 512, "bytes per round trip on a long-lived connection")
	fs.DurationVar(&o.Every, "every", 200*time.Millisecond, "between round trips on a long-lived connection")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "per attempt and per round trip")
	fs.DurationVar(&o.ResolveEvery, "resolve-every", time.Second, "how often DNS targets are resolved")
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "the load stops after this long")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", 64, "attempts open at once per target")
	fs.Parse(args)
	o.Targets = ts
	if err := echo.Load(ctx, o, printer[echo.LoadEvent]()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// sweep is `svclb-echo sweep`: every address of -to and of the scanned part
// of -prefix, -count attempts each, one Result line per attempt.
func sweep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sweep", flag.ExitOnError)
	var o echo.SweepOptions
	to := fs.String("to", "", "comma-separated host:port addresses")
	prefix := fs.String("prefix", "", "IPv4 prefix to scan (with -hosts and -ports)")
	fs.IntVar(&o.Hosts, "hosts", 0, "addresses of -prefix to scan, from its first")
	ports := fs.String("ports", "80", "comma-separated ports for -prefix")
	fs.IntVar(&o.Count, "count", 1, "attempts per address")
	fs.IntVar(&o.Parallel, "parallel", 1, "addresses dialled at once")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "per attempt")
	fs.Parse(args)
	if *to != "" {
		o.To = strings.Split(*to, ",")
	}
	if *prefix != "" {
		p, err := netip.ParsePrefix(*prefix)
		if err != nil {
			return fmt.Errorf("sweep: -prefix: %w", err)
		}
		o.Prefix = p
		for _, s := range strings.Split(*ports, ",") {
			n, err := strconv.ParseUint(s, 10, 16)
			if err != nil {
				return fmt.Errorf("sweep: -ports %q: %w", s, err)
			}
			o.Ports = append(o.Ports, uint16(n))
		}
	}
	return echo.Sweep(ctx, o, printer[echo.Result]())
}
