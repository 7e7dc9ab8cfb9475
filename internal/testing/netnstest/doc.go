// Package netnstest gives a test a throwaway network namespace.
//
//	ns := netnstest.New(t)          // not root: skips under `make unit`, fails under `make test`
//	err := ns.Do(func() error {      // runs on a locked OS thread inside ns
//		...
//	})
//	out, err := ns.Command("nft", "list", "ruleset").CombinedOutput()
//
// The namespace is named (it has a file under /var/run/netns) so that tools
// and libraries can reach it by path or fd; its loopback is up. It is deleted
// by t.Cleanup. Names are unique per process and test, so packages may run in
// parallel.
package netnstest
