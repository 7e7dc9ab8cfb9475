package enroll

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CheckNetns returns nil when path is a network namespace file other than the caller's own
// network namespace. The agent binds a transparent capture listener wherever a pod's netns
// path points: a path from a request or a state file that named the node's own namespace (the
// agent runs in it) would open the capture port on the node. The path must be absolute and
// clean; a bind-mounted namespace (/var/run/netns/…) and /proc/<pid>/ns/net both pass.
func CheckNetns(path string) error {
	if path == "" || !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("enroll: netns path %q is not an absolute, clean path", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("enroll: netns: %w", err)
	}
	defer f.Close()
	// NS_GET_NSTYPE answers only on a namespace file, with the kind of namespace.
	kind, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil {
		return fmt.Errorf("enroll: netns %s is not a namespace file: %w", path, err)
	}
	if kind != unix.CLONE_NEWNET {
		return fmt.Errorf("enroll: netns %s is a namespace of another kind (%#x), not a network namespace", path, kind)
	}
	var st, own unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("enroll: stat netns %s: %w", path, err)
	}
	if err := unix.Stat("/proc/self/ns/net", &own); err != nil {
		return fmt.Errorf("enroll: stat the agent's own netns: %w", err)
	}
	if st.Dev == own.Dev && st.Ino == own.Ino {
		return fmt.Errorf("enroll: netns %s is the agent's own network namespace (the node's), not a pod's", path)
	}
	return nil
}
