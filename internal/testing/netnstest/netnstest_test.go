package netnstest

import (
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

func TestNew(t *testing.T) {
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()

	ns := New(t)
	if _, err := os.Stat(ns.Path()); err != nil {
		t.Fatalf("namespace file: %v", err)
	}
	err = ns.Do(func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if cur.Equal(host) {
			t.Error("Do ran in the host namespace")
		}
		if !cur.Equal(netns.NsHandle(ns.Fd())) {
			t.Error("Do ran in a namespace other than ns")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if !after.Equal(host) {
		t.Fatal("caller's thread left in another namespace")
	}

	out, err := ns.Command("ip", "-o", "link", "show", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link in ns: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "UP") {
		t.Errorf("loopback not up in ns: %s", out)
	}
}
