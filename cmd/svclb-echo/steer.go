package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/aether-mesh/svclb/fixtures/capture"
)

// steer is what a hostile meshed pod with NET_ADMIN does to its own capture: TCP to each of
// --to is diverted to the node proxy's capture listener like the pod's other outbound TCP.
func steer(args []string) error {
	fs := flag.NewFlagSet("steer", flag.ExitOnError)
	to := fs.String("to", "", "comma-separated IPv4 host:port list to steer to the capture listener")
	fs.Parse(args)
	var dsts []netip.AddrPort
	for _, s := range strings.Split(*to, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return fmt.Errorf("steer: --to %q: %w", s, err)
		}
		dsts = append(dsts, ap)
	}
	if len(dsts) == 0 {
		return fmt.Errorf("steer: --to names no destination")
	}
	if err := capture.Steer("", dsts); err != nil {
		return err
	}
	fmt.Printf("steered %d destinations\n", len(dsts))
	return nil
}
