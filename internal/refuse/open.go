package refuse

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
)

// Open returns a connection into the network namespace at path (a pod's netns file) through
// the namespace's fd, which close releases: the caller's thread never enters it.
func Open(path string) (c *nftables.Conn, close func(), err error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, nil, fmt.Errorf("refuse: open netns %s: %w", path, err)
	}
	c, err = nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		_ = ns.Close()
		return nil, nil, fmt.Errorf("refuse: nftables in %s: %w", path, err)
	}
	return c, func() { _ = ns.Close() }, nil
}
