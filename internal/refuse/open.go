package refuse

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
)

// Open returns a lasting connection into the network namespace at path (a pod's netns file),
// its netlink socket opened there through the namespace's fd: the caller's thread never
// enters it. One socket serves every later transaction (a socket per transaction costs a
// thread switched in and out of the netns each time). The socket holds the netns: close
// releases it.
func Open(path string) (c *nftables.Conn, close func(), err error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, nil, fmt.Errorf("refuse: open netns %s: %w", path, err)
	}
	defer ns.Close() // the socket, made in New, keeps the netns
	c, err = nftables.New(nftables.WithNetNSFd(int(ns)), nftables.AsLasting())
	if err != nil {
		return nil, nil, fmt.Errorf("refuse: nftables in %s: %w", path, err)
	}
	return c, func() { _ = c.CloseLasting() }, nil
}
