package netnstest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
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

// freshRunEnv marks the child of TestDeleteAfterIproute2: it runs where /var/run/netns is a
// plain directory, as on a machine on which no `ip netns add` has run since boot.
const freshRunEnv = "SVCLB_NETNSTEST_FRESH_RUN"

// TestDeleteAfterIproute2: a namespace made before another process's first `ip netns add`
// (which binds /var/run/netns onto itself) is still deleted when its test ends. The check runs
// in a child in a private mount namespace with a fresh /run, so it does not depend on what ran
// on this host since boot; the child fails in its cleanup if the delete fails.
func TestDeleteAfterIproute2(t *testing.T) {
	ip := prereq.Command(t, "ip")
	if os.Getenv(freshRunEnv) == "1" {
		New(t)
		probe := "svclbt-probe-" + strconv.Itoa(os.Getpid())
		for _, args := range [][]string{{"netns", "add", probe}, {"netns", "del", probe}} {
			if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v: %s", args, err, out)
			}
		}
		return
	}
	prereq.Root(t, "creates a mount and network namespace")
	unshare := prereq.Command(t, "unshare")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount -t tmpfs svclbt-run /run && exec "$@"`, "sh",
		self, "-test.run", "^TestDeleteAfterIproute2$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), freshRunEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child with a fresh /run: %v\n%s", err, out)
	}
}
