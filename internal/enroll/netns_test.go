package enroll

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

func TestCheckNetns(t *testing.T) {
	pod := netnstest.New(t) // root: skips under make unit
	if err := CheckNetns(pod.Path()); err != nil {
		t.Errorf("a pod's netns %s: %v", pod.Path(), err)
	}
	plain := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"the caller's own netns":            "/proc/self/ns/net",
		"PID 1's netns (the caller's here)": "/proc/1/ns/net",
		"a mount namespace":                 "/proc/self/ns/mnt",
		"a regular file":                    plain,
		"a missing file":                    filepath.Join(t.TempDir(), "gone"),
		"a relative path":                   "var/run/netns/x",
		"an unclean path":                   pod.Path() + "/../" + filepath.Base(pod.Path()),
		"empty":                             "",
	} {
		if err := CheckNetns(path); err == nil {
			t.Errorf("%s (%q): accepted", name, path)
		}
	}
}
