package cniplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"

	"github.com/aether-mesh/svclb/fixtures/capture"
	icapture "github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/enroll/enrolltest"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

const meshNS = "mesh"

// prevResult is what a main plugin (flannel's bridge, kindnet's ptp) returns: the host
// veth, the pod's eth0 in the sandbox and its address.
func prevResult(netnsPath string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0",
	 "interfaces":[{"name":"cni0","mac":"aa:bb:cc:00:00:01"},{"name":"veth1234","mac":"aa:bb:cc:00:00:02"},
	               {"name":"eth0","mac":"aa:bb:cc:00:00:03","sandbox":%q}],
	 "ips":[{"interface":2,"address":"10.244.0.5/24","gateway":"10.244.0.1"}],
	 "routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"}],
	 "dns":{}}`, netnsPath)
}

// conf is the plugin's configuration with the agent on socket and its namespace view next to it
// (viewPath), so no test reads the host's.
func conf(socket, netnsPath, extra string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"cbr0","type":"svclb-cni","agentSocket":%q,"namespacesFile":%q,"timeout":"5s"%s,"prevResult":%s}`,
		socket, viewPath(socket), extra, prevResult(netnsPath)))
}

// viewPath is where conf points the plugin for the agent's namespace view.
func viewPath(socket string) string { return filepath.Join(filepath.Dir(socket), "namespaces.json") }

func cmdArgs(netnsPath, namespace string, stdin []byte) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "c0ffee", Netns: netnsPath, IfName: "eth0", StdinData: stdin,
		Args: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c0ffee;K8S_POD_UID=uid-1", namespace),
	}
}

// enrollMesh enrolls the pods of namespace meshNS only.
func enrollMesh(p enroll.Pod) enroll.Decision {
	return enroll.Decision{Enrolled: p.Namespace == meshNS, Reason: "namespace " + p.Namespace}
}

// samePrev asserts the plugin printed the main plugin's result unchanged.
func samePrev(t *testing.T, out []byte, netnsPath string) {
	t.Helper()
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("result %q: %v", out, err)
	}
	if err := json.Unmarshal([]byte(prevResult(netnsPath)), &want); err != nil {
		t.Fatal(err)
	}
	delete(want, "dns") // an empty DNS is omitted on output
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("result differs from prevResult (-want +got):\n%s", d)
	}
}

func TestAddCheckDelEnrolled(t *testing.T) {
	ns := netnstest.New(t)
	agent := enrolltest.Start(t, &enrolltest.Agent{Decider: enrollMesh})
	p := &Plugin{}
	stdin := conf(agent.Socket, ns.Path(), "")

	// Twice: a retried ADD (the kubelet's) must leave one copy of everything.
	for i := range 2 {
		var out bytes.Buffer
		p.Stdout = &out
		if err := p.Add(cmdArgs(ns.Path(), meshNS, stdin)); err != nil {
			t.Fatalf("ADD #%d: %v", i+1, err)
		}
		samePrev(t, out.Bytes(), ns.Path())
	}
	if err := capture.Installed(ns.Path()); err != nil {
		t.Fatalf("after ADD: %v", err)
	}
	rules, err := ns.Command("ip", "rule", "show", "fwmark", fmt.Sprintf("%#x", contract.CaptureMark)).CombinedOutput()
	if err != nil || strings.Count(strings.TrimSpace(string(rules)), "\n") != 0 {
		t.Errorf("want exactly one fwmark rule after two ADDs, got %q (%v)", rules, err)
	}
	want := enroll.Pod{Namespace: meshNS, Name: "web-0", UID: "uid-1", ContainerID: "c0ffee", Netns: ns.Path(), IP: "10.244.0.5"}
	if d := cmp.Diff([]enroll.Pod{want, want}, agent.Adds()); d != "" {
		t.Errorf("agent was told (-want +got):\n%s", d)
	}
	if err := p.Check(cmdArgs(ns.Path(), meshNS, stdin)); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}

	if err := p.Del(cmdArgs(ns.Path(), meshNS, stdin)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if err := capture.Absent(""); err != nil {
		// "": the test's own netns, which must never have been touched.
		t.Errorf("the host namespace: %v", err)
	}
	if err := capture.Absent(ns.Path()); err != nil {
		t.Errorf("after DEL: %v", err)
	}
	if n := len(agent.Dels()); n != 1 {
		t.Errorf("agent got %d dels, want 1", n)
	}
	// The fake agent's listener is gone too: CHECK waits for it until its timeout.
	if err := p.Check(cmdArgs(ns.Path(), meshNS, conf(agent.Socket, ns.Path(), `,"timeout":"300ms"`))); err == nil {
		t.Error("CHECK passed after DEL removed the rules")
	}
	// DEL again (the runtime retries): still fine.
	if err := p.Del(cmdArgs(ns.Path(), meshNS, stdin)); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
}

func TestAddNotEnrolledPassesThrough(t *testing.T) {
	ns := netnstest.New(t)
	agent := enrolltest.Start(t, &enrolltest.Agent{Decider: enrollMesh})
	var out bytes.Buffer
	p := &Plugin{Stdout: &out}
	start := time.Now()
	if err := p.Add(cmdArgs(ns.Path(), "plain", conf(agent.Socket, ns.Path(), ""))); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a pass-through ADD took %s", d)
	}
	samePrev(t, out.Bytes(), ns.Path())
	if err := capture.Absent(ns.Path()); err != nil {
		t.Errorf("a pod that is not enrolled: %v", err)
	}
	if err := p.Check(cmdArgs(ns.Path(), "plain", conf(agent.Socket, ns.Path(), ""))); err != nil {
		t.Errorf("CHECK of a pass-through pod: %v", err)
	}
}

func TestAddExcludedNamespaceDoesNotAskTheAgent(t *testing.T) {
	ns := netnstest.New(t)
	var out bytes.Buffer
	p := &Plugin{Stdout: &out}
	missing := filepath.Join(t.TempDir(), "none.sock")
	if err := p.Add(cmdArgs(ns.Path(), "kube-system", conf(missing, ns.Path(), `,"excludeNamespaces":["kube-system"]`))); err != nil {
		t.Fatalf("ADD in an excluded namespace with no agent: %v", err)
	}
	samePrev(t, out.Bytes(), ns.Path())
}

func TestAddAgentMissingFailsNamingTheSocket(t *testing.T) {
	ns := netnstest.New(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	err := (&Plugin{Stdout: &bytes.Buffer{}}).Add(cmdArgs(ns.Path(), meshNS, conf(missing, ns.Path(), "")))
	var ce *types.Error
	if !errors.As(err, &ce) {
		t.Fatalf("ADD with no agent: want a CNI error, got %v", err)
	}
	if ce.Code != types.ErrTryAgainLater || !strings.Contains(ce.Details, missing) {
		t.Errorf("want code %d naming %s, got %+v", types.ErrTryAgainLater, missing, ce)
	}
	if err := capture.Absent(ns.Path()); err != nil {
		t.Errorf("the agent could not be asked: %v", err)
	}
}

func TestAddFailsWhenTheListenerNeverComes(t *testing.T) {
	ns := netnstest.New(t)
	agent := enrolltest.Start(t, &enrolltest.Agent{NoListener: true})
	start := time.Now()
	err := (&Plugin{Stdout: &bytes.Buffer{}}).Add(cmdArgs(ns.Path(), meshNS, conf(agent.Socket, ns.Path(), `,"timeout":"1s"`)))
	if err == nil || !strings.Contains(err.Error(), "listener") {
		t.Fatalf("want an error about the listener, got %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("ADD took %s with a 1s timeout", d)
	}
}

func TestMalformedInput(t *testing.T) {
	ns := netnstest.New(t)
	agent := enrolltest.Start(t, &enrolltest.Agent{})
	for _, tc := range []struct {
		name  string
		stdin string
		args  string
		code  uint
	}{
		{"not JSON", `{"cniVersion":`, "", types.ErrDecodingFailure},
		{"no prevResult", `{"cniVersion":"1.0.0","name":"n","type":"svclb-cni"}`, "", types.ErrInvalidNetworkConfig},
		{"bad prevResult", `{"cniVersion":"1.0.0","name":"n","type":"svclb-cni","prevResult":{"ips":"nope"}}`, "", types.ErrDecodingFailure},
		{"bad timeout", string(conf(agent.Socket, ns.Path(), `,"timeout":"soon"`)), "", types.ErrInvalidNetworkConfig},
		{"bad CNI_ARGS", string(conf(agent.Socket, ns.Path(), "")), "K8S_POD_NAME", types.ErrInvalidEnvironmentVariables},
		{"unknown CNI_ARGS", string(conf(agent.Socket, ns.Path(), "")), "FOO=bar", types.ErrInvalidEnvironmentVariables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := cmdArgs(ns.Path(), meshNS, []byte(tc.stdin))
			if tc.args != "" {
				a.Args = tc.args
			}
			for cmd, f := range map[string]func(*skel.CmdArgs) error{"ADD": (&Plugin{Stdout: &bytes.Buffer{}}).Add, "CHECK": (&Plugin{}).Check} {
				err := f(a)
				var ce *types.Error
				if !errors.As(err, &ce) || ce.Code != tc.code {
					t.Errorf("%s: want CNI error code %d, got %v", cmd, tc.code, err)
				}
			}
			if err := (&Plugin{}).Del(a); err != nil {
				t.Errorf("DEL must succeed, got %v", err)
			}
		})
	}
	if n := len(agent.Adds()); n != 0 {
		t.Errorf("malformed input reached the agent %d times", n)
	}
}

func TestDelSucceedsWithoutAgentOrNetns(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	gone := filepath.Join(t.TempDir(), "netns-gone")
	if err := (&Plugin{}).Del(cmdArgs(gone, meshNS, conf(missing, gone, ""))); err != nil {
		t.Fatalf("DEL: %v", err)
	}
}

// TestAddLeavesTheNodeAddrsUncaptured: the node's addresses the agent's decision names (those
// its listener refuses) are the ones the pod's capture leaves alone; one the capture cannot take
// fails the ADD, retried, with nothing installed.
func TestAddLeavesTheNodeAddrsUncaptured(t *testing.T) {
	agentWith := func(addr string) *enrolltest.Agent {
		return enrolltest.Start(t, &enrolltest.Agent{Decider: func(p enroll.Pod) enroll.Decision {
			d := enrollMesh(p)
			d.NodeAddrs = []netip.Addr{netip.MustParseAddr(addr)}
			return d
		}})
	}
	ns := netnstest.New(t)
	agent := agentWith("172.18.0.3")
	p := &Plugin{Stdout: &bytes.Buffer{}}
	if err := p.Add(cmdArgs(ns.Path(), meshNS, conf(agent.Socket, ns.Path(), ""))); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	out, err := ns.Command("nft", "list", "set", "ip", icapture.TableName, icapture.NodeAddrsSet).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "elements = { 172.18.0.3 }") {
		t.Errorf("the pod's uncaptured node addresses (%v):\n%s\nwant exactly 172.18.0.3", err, out)
	}

	bad := netnstest.New(t)
	agent = agentWith("127.0.0.1")
	err = p.Add(cmdArgs(bad.Path(), meshNS, conf(agent.Socket, bad.Path(), "")))
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Details, "127.0.0.1") {
		t.Errorf("ADD with a node address the capture refuses: %v; want try-again-later naming it", err)
	}
	if err := capture.Absent(bad.Path()); err != nil {
		t.Errorf("after the failed ADD: %v", err)
	}
}
