package kubeproxyguard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// clusterIPElements lists, sorted, the elements of service-ips and
// no-endpoint-services keyed by ip in a canonical listing (listTable), as
// "map: element".
func clusterIPElements(table, ip string) []string {
	var out []string
	inMap := ""
	for _, l := range strings.Split(table, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "map ") && strings.HasSuffix(l, " {"):
			inMap = strings.TrimSuffix(strings.TrimPrefix(l, "map "), " {")
		case l == "}":
			inMap = ""
		case (inMap == serviceIPsMap || inMap == noEndpointServicesMap) && strings.HasPrefix(l, ip+" . "):
			out = append(out, inMap+": "+strings.TrimSuffix(l, ","))
		}
	}
	slices.Sort(out)
	return out
}

// cutEveryPort is the nft script of a guard that cut every ClusterIP entry
// of ip, whatever its protocol and port: each element deleted and added
// back with verdict continue and the comment keeping kube-proxy's verdict
// and comment (cutLine).
func cutEveryPort(table, ip string) string {
	var out []string
	for _, e := range clusterIPElements(table, ip) {
		m, l, _ := strings.Cut(e, ": ")
		key, _, _ := strings.Cut(l, " : ")
		key, _, _ = strings.Cut(key, " comment ")
		out = append(out,
			"delete element ip "+TableName+" "+m+" { "+key+" }",
			"add element ip "+TableName+" "+m+" { "+strings.TrimSuffix(cutLine(l+","), ",")+" }")
	}
	return strings.Join(out, "\n") + "\n"
}

// withCut is a canonical listing with the elements keyed by keys ("IP .
// proto . port") replaced by their cut (cutLine).
func withCut(table string, keys ...string) string {
	lines := strings.Split(table, "\n")
	for i, l := range lines {
		for _, k := range keys {
			if t := strings.TrimSpace(l); strings.HasPrefix(t, k+" ") && strings.HasSuffix(t, ",") {
				lines[i] = cutLine(l)
			}
		}
	}
	return canonical(strings.Join(lines, "\n"))
}

// statusPort is a port of /status's kubeProxyPorts, read as its JSON
// readers do.
type statusPort struct {
	Port   string `json:"port"`
	Reason string `json:"reason"`
}

// expectPorts reads /status and checks what it says of s's ports: cut ones,
// and those left to kube-proxy with why.
func expectPorts(t *testing.T, g *Guard, s types.NamespacedName, cut []string, kept []statusPort) {
	t.Helper()
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Services []struct {
			Namespace      string       `json:"namespace"`
			Name           string       `json:"name"`
			CutPorts       []string     `json:"cutPorts"`
			KubeProxyPorts []statusPort `json:"kubeProxyPorts"`
		} `json:"services"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/status: %v", err)
	}
	for _, ss := range st.Services {
		if ss.Namespace != s.Namespace || ss.Name != s.Name {
			continue
		}
		if !slices.Equal(ss.CutPorts, cut) || !slices.Equal(ss.KubeProxyPorts, kept) {
			t.Errorf("/status of %s: cutPorts %v, kubeProxyPorts %+v; want %v, %+v", s, ss.CutPorts, ss.KubeProxyPorts, cut, kept)
		}
		return
	}
	t.Errorf("/status lists no %s", s)
}

// multiIP is default/multi's ClusterIP in kube-proxy-v1.34-ports.nft.
const multiIP = "10.96.77.77"

// TestGuardCutsOnlyMeshedPorts: a chosen Service with TCP, UDP, SCTP and
// DNS ports (kube-proxy-v1.34-ports.nft, as kube-proxy v1.34.4 wrote it),
// every ClusterIP entry cut by a guard that cut every protocol and port. A
// one-shot guard and the DaemonSet's both cut only tcp/80 and tcp/9153 (the
// ports the meshed path takes over) and put every other element back
// exactly as kube-proxy wrote it; after kube-proxy's restore they cut
// those two again and nothing else; /status says which ports and why.
// Once the Service is no longer chosen, every cut of it is put back.
func TestGuardCutsOnlyMeshedPorts(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	load(t, ns, "kube-proxy-v1.34-ports.nft")
	c := conn(t, ns)
	multi := svc("default/multi")
	kubeProxy := listTable(t, ns)
	want := withCut(kubeProxy, multiIP+" . tcp . 80", multiIP+" . tcp . 9153")
	cutByOldGuard := cutEveryPort(kubeProxy, multiIP)

	// The one-shot form (svclb-guard delete): no RestoreUnchosen.
	loadScript(t, ns, cutByOldGuard)
	g, err := New(Options{NetNS: ns.Fd(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.SetServices([]types.NamespacedName{multi})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := g.DeleteNow(ctx); err != nil {
		t.Fatal(err)
	}
	after := listTable(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.34-ports-guarded.golden"), []byte(after))
	if after != want {
		t.Fatalf("one-shot: the ruleset differs from kube-proxy's with only tcp/80 and tcp/9153 cut:\n%s", lineDiff(want, after))
	}
	expectPorts(t, g, multi, multiCut, multiKept)

	// The DaemonSet's guard, after kube-proxy's full sync put everything
	// back and the old guard cut it all again.
	loadScript(t, ns, restoreElements(t, "kube-proxy-v1.34-ports.nft"))
	if got := listTable(t, ns); got != kubeProxy {
		t.Fatalf("kube-proxy's restore is not kube-proxy's ruleset:\n%s", lineDiff(kubeProxy, got))
	}
	loadScript(t, ns, cutByOldGuard)
	g2 := startGuard(t, ns, time.Hour, multi)
	var got string
	if _, ok := waitFor(5*time.Second, func() bool { got = listTable(t, ns); return got == want }); !ok {
		t.Fatalf("run: the ruleset differs from kube-proxy's with only tcp/80 and tcp/9153 cut:\n%s", lineDiff(want, got))
	}
	settle(t, g2)
	expectPorts(t, g2, multi, multiCut, multiKept)
	for i := range 3 {
		loadScript(t, ns, restoreElements(t, "kube-proxy-v1.34-ports.nft"))
		expectCut(t, c, []types.NamespacedName{multi}, fmt.Sprint("restore ", i))
		if got := listTable(t, ns); got != want {
			t.Fatalf("restore %d: the ruleset after the cut differs:\n%s", i, lineDiff(want, got))
		}
	}

	// No longer chosen: the DaemonSet's guard puts back every cut of it,
	// whatever the port, also those the old guard made afterwards.
	g2.SetServices(nil)
	settle(t, g2)
	loadScript(t, ns, cutByOldGuard)
	if _, ok := waitFor(5*time.Second, func() bool { got = listTable(t, ns); return got == kubeProxy }); !ok {
		t.Fatalf("unchosen: the ruleset is not kube-proxy's:\n%s", lineDiff(kubeProxy, got))
	}
}
