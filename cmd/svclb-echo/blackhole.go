package main

import (
	"flag"
	"fmt"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// blackhole makes the pod an endpoint that never answers: its init container drops every
// TCP packet for --port in the pod's netns (needs NET_ADMIN there), and the server, Ready on
// its health port, never sees a SYN.
func blackhole(args []string) error {
	fs := flag.NewFlagSet("blackhole", flag.ContinueOnError)
	port := fs.Uint("port", 0, "TCP port whose packets are dropped")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port == 0 || *port > 65535 || fs.NArg() > 0 {
		return fmt.Errorf("blackhole: want --port 1..65535 and no arguments (have --port %d, %q)", *port, fs.Args())
	}
	if err := echo.Blackhole("", uint16(*port)); err != nil {
		return err
	}
	fmt.Printf("dropping TCP to port %d\n", *port)
	return nil
}
