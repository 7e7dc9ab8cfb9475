package cniinstall

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// node lays out a host's CNI directories with flannel's conflist and a plugin binary to copy.
func node(t *testing.T) *Installer {
	t.Helper()
	root := t.TempDir()
	in := &Installer{ConfDir: filepath.Join(root, "net.d"), BinDir: filepath.Join(root, "bin"), Source: filepath.Join(root, "svclb-cni"),
		Entry: testEntry(), Interval: 10 * time.Millisecond}
	for _, d := range []string{in.ConfDir, in.BinDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(in.Source, []byte("plugin v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.ConfDir, "10-flannel.conflist"), read(t, "testdata/flannel.conflist"), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

func hasEntry(t *testing.T, path string) bool {
	t.Helper()
	_, changed, err := Remove(read(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

// TestRunInstallsReinsertsAndUninstalls: the binary lands and the installer's own conflist
// (flannel's with the plugin appended) sorts first; flannel's file is never written; a main
// plugin that renders its conflist anew (another subnet) is followed, a deleted own file or
// binary comes back; the end of Run takes both away.
func TestRunInstallsReinsertsAndUninstalls(t *testing.T) {
	g := gomega.NewWithT(t)
	in := node(t)
	flannel := filepath.Join(in.ConfDir, "10-flannel.conflist")
	own := filepath.Join(in.ConfDir, contract.CNIConfFile)
	bin := filepath.Join(in.BinDir, contract.CNIPluginType)
	orig := read(t, flannel)
	// A later file is not the runtime's: it stays untouched.
	other := filepath.Join(in.ConfDir, "99-other.conflist")
	if err := os.WriteFile(other, read(t, "testdata/kindnet.conflist"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, func() { close(ready) }) }()
	g.Eventually(ready).WithTimeout(5 * time.Second).Should(gomega.BeClosed())
	g.Expect(ActiveConfig(in.ConfDir)).To(gomega.Equal(own))
	g.Expect(hasEntry(t, own)).To(gomega.BeTrue())
	g.Expect(read(t, flannel)).To(gomega.Equal(orig), "the main plugin's conflist was written")
	g.Expect(hasEntry(t, other)).To(gomega.BeFalse())
	g.Expect(os.ReadFile(bin)).To(gomega.Equal([]byte("plugin v1")))
	want, _, err := Insert(orig, testEntry())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(read(t, own)).To(gomega.Equal(want))

	// flannel renders its conflist for another subnet: the own file follows.
	moved := []byte(strings.ReplaceAll(string(orig), "10.244.0.", "10.244.7."))
	g.Expect(os.WriteFile(flannel, moved, 0o644)).To(gomega.Succeed())
	want, _, _ = Insert(moved, testEntry())
	g.Eventually(func() []byte { return read(t, own) }).WithTimeout(5 * time.Second).Should(gomega.Equal(want))
	g.Expect(os.Remove(own)).To(gomega.Succeed())
	g.Eventually(func() error { _, err := os.Stat(own); return err }).WithTimeout(5 * time.Second).Should(gomega.Succeed())
	g.Expect(os.Remove(bin)).To(gomega.Succeed())
	g.Eventually(func() error { _, err := os.Stat(bin); return err }).WithTimeout(5 * time.Second).Should(gomega.Succeed())

	cancel()
	g.Expect(<-done).To(gomega.Succeed())
	for _, f := range []string{own, bin} {
		_, err = os.Stat(f)
		g.Expect(os.IsNotExist(err)).To(gomega.BeTrue(), "%s left behind: %v", f, err)
	}
	g.Expect(read(t, flannel)).To(gomega.Equal(moved))
	g.Expect(ActiveConfig(in.ConfDir)).To(gomega.Equal(flannel))
}

// TestUninstallCleansAnOlderInstallersEntry: an entry written into the main plugin's conflist
// (as the first installer did) is taken out too.
func TestUninstallCleansAnOlderInstallersEntry(t *testing.T) {
	in := node(t)
	flannel := filepath.Join(in.ConfDir, "10-flannel.conflist")
	withEntry, _, err := Insert(read(t, flannel), testEntry())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flannel, withEntry, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Uninstall(); err != nil {
		t.Fatal(err)
	}
	if hasEntry(t, flannel) {
		t.Error("the older entry is still in flannel's conflist")
	}
}

// TestRunWaitsForTheMainPlugin: with no conflist yet (the main plugin's DaemonSet has not run)
// the installer keeps trying and is not ready.
func TestRunWaitsForTheMainPlugin(t *testing.T) {
	g := gomega.NewWithT(t)
	in := node(t)
	conf := filepath.Join(in.ConfDir, "10-flannel.conflist")
	flannel := read(t, conf)
	g.Expect(os.Remove(conf)).To(gomega.Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, func() { close(ready) }) }()
	defer func() { // Run uninstalls on its way out: before TempDir cleanup
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	g.Consistently(ready).WithTimeout(100 * time.Millisecond).ShouldNot(gomega.BeClosed())
	g.Expect(os.WriteFile(conf, flannel, 0o644)).To(gomega.Succeed())
	g.Eventually(ready).WithTimeout(5 * time.Second).Should(gomega.BeClosed())
	g.Expect(hasEntry(t, filepath.Join(in.ConfDir, contract.CNIConfFile))).To(gomega.BeTrue())
}

func TestActiveConfigIsTheFirstByName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"20-b.conflist", "10-a.conf", "05-notes.txt", ".10-hidden.conflist"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ActiveConfig(dir)
	if err != nil || filepath.Base(got) != "10-a.conf" {
		t.Errorf("ActiveConfig = %q, %v; want 10-a.conf", got, err)
	}
}
