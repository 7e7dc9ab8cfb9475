package cniplugin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"

	"github.com/aether-mesh/svclb/fixtures/capture"
	"github.com/aether-mesh/svclb/internal/enroll/enrolltest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// buildPlugin builds cmd/svclb-cni as the images do (static).
func buildPlugin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "svclb-cni")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/aether-mesh/svclb/cmd/svclb-cni")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build svclb-cni: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryChainedAfterFlannel runs the built plugin the way containerd does (libcni's
// invoke: environment, stdin, stdout) with flannel's conflist version 0.3.1 and a bridge
// prevResult of that version: an enrolled pod's ADD installs the capture and returns the
// bridge's result; a malformed configuration is a CNI error on stdout; DEL cleans up.
func TestBinaryChainedAfterFlannel(t *testing.T) {
	bin := buildPlugin(t)
	ns := netnstest.New(t)
	agent := enrolltest.Start(t, &enrolltest.Agent{Decider: enrollMesh})
	prev := fmt.Sprintf(`{"cniVersion":"0.3.1","interfaces":[{"name":"cni0","mac":"aa:bb:cc:00:00:01"},{"name":"eth0","mac":"aa:bb:cc:00:00:03","sandbox":%q}],
	  "ips":[{"version":"4","interface":1,"address":"10.244.0.5/24","gateway":"10.244.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"}],"dns":{}}`, ns.Path())
	conf := []byte(fmt.Sprintf(`{"cniVersion":"0.3.1","name":"cbr0","type":"svclb-cni","agentSocket":%q,"timeout":"10s","prevResult":%s}`, agent.Socket, prev))
	args := func(cmd string) *invoke.Args {
		return &invoke.Args{Command: cmd, ContainerID: "c0ffee", NetNS: ns.Path(), IfName: "eth0", Path: filepath.Dir(bin),
			PluginArgsStr: "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + meshNS + ";K8S_POD_NAME=web-0;K8S_POD_UID=uid-1"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := invoke.ExecPluginWithResult(ctx, bin, conf, args("ADD"), nil)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	t.Logf("ADD of an enrolled pod took %s", time.Since(start))
	if v := res.Version(); v != "0.3.1" {
		t.Errorf("ADD result version %s, want the configuration's 0.3.1", v)
	}
	r, err := types040.GetResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.0.5/24" {
		t.Errorf("ADD result %+v: want the bridge's result", r)
	}
	if err := capture.Installed(ns.Path()); err != nil {
		t.Errorf("after ADD: %v", err)
	}

	_, err = invoke.ExecPluginWithResult(ctx, bin, []byte(`{"cniVersion":"0.3.1","name":"cbr0","type":"svclb-cni"}`), args("ADD"), nil)
	var ce *types.Error
	if !errors.As(err, &ce) || ce.Code != types.ErrInvalidNetworkConfig || !strings.Contains(ce.Msg, "prevResult") {
		t.Errorf("ADD without prevResult: want CNI error %d about prevResult, got %v", types.ErrInvalidNetworkConfig, err)
	}

	if err := invoke.ExecPluginWithoutResult(ctx, bin, conf, args("DEL"), nil); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if err := capture.Absent(ns.Path()); err != nil {
		t.Errorf("after DEL: %v", err)
	}
}

// TestBinaryAgentDown runs the built plugin as containerd does with no agent on its socket and
// the agent's namespace view on disk: a pod of a namespace the view says is not enrolled gets
// the bridge's result; one of an enrolled namespace is a CNI error naming the socket.
func TestBinaryAgentDown(t *testing.T) {
	bin := buildPlugin(t)
	ns := netnstest.New(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	writeView(t, viewPath(missing))
	prev := fmt.Sprintf(`{"cniVersion":"0.3.1","interfaces":[{"name":"eth0","mac":"aa:bb:cc:00:00:03","sandbox":%q}],
	  "ips":[{"version":"4","interface":0,"address":"10.244.0.5/24","gateway":"10.244.0.1"}],"dns":{}}`, ns.Path())
	conf := []byte(fmt.Sprintf(`{"cniVersion":"0.3.1","name":"cbr0","type":"svclb-cni","agentSocket":%q,"namespacesFile":%q,"prevResult":%s}`,
		missing, viewPath(missing), prev))
	args := func(namespace string) *invoke.Args {
		return &invoke.Args{Command: "ADD", ContainerID: "c0ffee", NetNS: ns.Path(), IfName: "eth0", Path: filepath.Dir(bin),
			PluginArgsStr: "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + namespace + ";K8S_POD_NAME=web-0;K8S_POD_UID=uid-1"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := invoke.ExecPluginWithResult(ctx, bin, conf, args("plain"), nil)
	if err != nil {
		t.Fatalf("ADD of a pod not enrolled, agent down: %v", err)
	}
	if r, err := types040.GetResult(res); err != nil || len(r.IPs) != 1 || r.IPs[0].Address.String() != "10.244.0.5/24" {
		t.Errorf("ADD result %+v (%v): want the bridge's result", res, err)
	}
	_, err = invoke.ExecPluginWithResult(ctx, bin, conf, args(meshNS), nil)
	var ce *types.Error
	if !errors.As(err, &ce) || ce.Code != types.ErrTryAgainLater || !strings.Contains(ce.Details, missing) {
		t.Errorf("ADD of an enrolled pod, agent down: want CNI error %d naming %s, got %v", types.ErrTryAgainLater, missing, err)
	}
	if err := capture.Absent(ns.Path()); err != nil {
		t.Error(err)
	}
}
