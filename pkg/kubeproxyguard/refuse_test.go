package kubeproxyguard

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/internal/testing/netnstest"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// lines is a concurrency-safe log sink.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestGuardRefusesAPIServer chooses default/kubernetes (as a labelled Service would be)
// together with the v1.34 ruleset's other Services: they are cut, the apiserver's Service
// keeps every object, is refused once in the log and listed in Status.Refused.
func TestGuardRefusesAPIServer(t *testing.T) {
	ns := netnstest.New(t)
	load(t, ns, "kube-proxy-v1.34.nft")
	c := conn(t, ns)
	api := contract.APIServerService
	if got := onPath(t, c, []types.NamespacedName{api}); len(got) != 1 {
		t.Fatalf("the fixture ruleset has no objects of %s", api)
	}
	logs := &lines{}
	g, err := New(Options{NodeName: "test", NetNS: ns.Fd(), Resync: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	chosen := append([]types.NamespacedName{api}, chosen134...)
	g.SetServices(chosen)
	g.SetServices(chosen) // WatchServices calls again on every change of a labelled Service
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := g.DeleteNow(ctx); err != nil {
		t.Fatal(err)
	}
	waitClean(t, c, chosen134)
	if got := onPath(t, c, []types.NamespacedName{api}); !slices.Equal(got, []types.NamespacedName{api}) {
		t.Errorf("%s was cut: on kube-proxy's path %v", api, got)
	}
	st := g.Status()
	if want := []RefusedService{{Namespace: "default", Name: "kubernetes", Reason: RefusedAPIServer}}; !slices.Equal(st.Refused, want) {
		t.Errorf("status refused %+v, want %+v", st.Refused, want)
	}
	for _, s := range st.Services {
		if s.Namespace == api.Namespace && s.Name == api.Name {
			t.Errorf("%s listed as guarded: %+v", api, s)
		}
	}
	if n := logs.count(`msg="refusing to guard Service" service=default/kubernetes`); n != 1 {
		t.Errorf("%d refusal log lines, want 1:\n%s", n, logs.b.String())
	}
	// Unlabelled: no longer listed.
	g.SetServices(chosen134)
	if st := g.Status(); len(st.Refused) != 0 {
		t.Errorf("refused after the label went: %+v", st.Refused)
	}
}

func TestRefuse(t *testing.T) {
	for svc, refused := range map[types.NamespacedName]bool{
		{Namespace: "default", Name: "kubernetes"}:     true,
		{Namespace: "other", Name: "kubernetes"}:       false,
		{Namespace: "default", Name: "kubernetes-api"}: false,
		{Namespace: "default", Name: "demo"}:           false,
	} {
		if got := Refuse(svc) != ""; got != refused {
			t.Errorf("Refuse(%s) = %q, want refused %v", svc, Refuse(svc), refused)
		}
	}
}
