package kubeproxyguard

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/testing/netnstest"
)

// TestGuardKeepsNodePortPath chooses four NodePort Services with external
// IPs (kube-proxy-v1.34-nodeport.nft: two ports; no endpoints;
// externalTrafficPolicy Local without a local endpoint; an external IP that
// is another Service's ClusterIP): the guard cuts their ClusterIP entry
// points and nothing else. Their NodePort elements
// (service-nodeports, no-endpoint-nodeports), external-IP elements (in the
// same two maps as the ClusterIP ones, with the same comment), chains and
// cluster-ips elements stay byte for byte, as do the unchosen Services, also
// after kube-proxy restores the elements.
func TestGuardKeepsNodePortPath(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	load(t, ns, "kube-proxy-v1.34-nodeport.nft")
	before := listTable(t, ns)
	c := conn(t, ns)
	chosen := []types.NamespacedName{svc("np/web"), svc("np/down"), svc("np/local"), svc("np/alias")}
	others := []types.NamespacedName{svc("np/keep"), svc("default/demo"), svc("default/empty")}

	g := startGuard(t, ns, time.Hour, chosen...)
	waitClean(t, c, chosen)
	after := listTable(t, ns)
	golden.Check(t, filepath.Join("testdata", "v1.34-nodeport-guarded.golden"), []byte(after))
	expectOnlyCut(t, before, after,
		"10.96.70.70 . tcp . 80 : goto service-OTUR7YSA-np/web/tcp/http,",
		"10.96.70.70 . tcp . 443 : goto service-LE7AQETR-np/web/tcp/https,",
		`10.96.80.80 . tcp . 80 comment "np/down:http" : goto reject-chain,`,
		"10.96.90.90 . tcp . 80 : goto service-DAOVGHWG-np/local/tcp/http,",
		"10.96.96.96 . tcp . 80 : goto service-ZI6G3KHV-np/alias/tcp/http,",
	)
	if got := onPath(t, c, others); len(got) != len(others) {
		t.Errorf("unchosen Services on kube-proxy's ClusterIP path: %v, want all of %v", got, others)
	}

	waitStatusClean(t, g)
	deleted := map[string]int{}
	for _, s := range g.Status().Services {
		deleted[s.Namespace+"/"+s.Name] = len(s.Deleted)
		for _, o := range s.Deleted {
			if strings.Contains(o.Name, "203.0.113.") || strings.Contains(o.Name, "external-") || !strings.HasPrefix(o.Name, "service-ips: 10.96.") && !strings.HasPrefix(o.Name, "no-endpoint-services: 10.96.") {
				t.Errorf("%s/%s: deleted %v, not a ClusterIP entry", s.Namespace, s.Name, o)
			}
		}
	}
	if want := map[string]int{"np/web": 2, "np/down": 1, "np/local": 1, "np/alias": 1}; !maps.Equal(deleted, want) {
		t.Errorf("deleted elements per Service %v, want %v", deleted, want)
	}

	// kube-proxy's restore re-adds every element (add: existing ones stay;
	// the cut ones it deletes first: their value is not its own).
	restore := restoreElements(t, "kube-proxy-v1.34-nodeport.nft")
	for i := range 3 {
		loadScript(t, ns, restore)
		expectCut(t, c, chosen, fmt.Sprint("restore ", i))
		if got := listTable(t, ns); got != after {
			t.Fatalf("restore %d: ruleset after re-deletion differs from the first:\n%s", i, lineDiff(after, got))
		}
	}
}

// restoreElements is the "add element" lines of a fixture: what kube-proxy's
// full sync writes again for its Services' elements. A one-element line of
// service-ips or no-endpoint-services is preceded by the delete of its key:
// kube-proxy's full sync deletes and re-adds an element whose value is not
// its own (the guard's continue); for one that is, the pair changes nothing.
func restoreElements(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "add element ") {
			continue
		}
		for _, m := range []string{serviceIPsMap, noEndpointServicesMap} {
			prefix := "add element ip " + TableName + " " + m + " { "
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				key, _, _ := strings.Cut(rest, " : ")
				key, _, _ = strings.Cut(key, " comment ")
				out = append(out, "delete element ip "+TableName+" "+m+" { "+key+" }")
			}
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n") + "\n"
}
