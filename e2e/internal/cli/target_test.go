package cli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestResolveTarget: --kubeconfig, then $KUBECONFIG (a list kept whole), then ~/.kube/config.
func TestResolveTarget(t *testing.T) {
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("no home") }
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		flag, env  string
		home       func() (string, error)
		wantFiles  []string
		wantSource string
		wantErr    bool
	}{
		{"flag wins", "/f", "/e", home, []string{"/f"}, "--kubeconfig", false},
		{"KUBECONFIG", "", "/e", home, []string{"/e"}, "$KUBECONFIG", false},
		{"KUBECONFIG list", "", "/a:/b", home, []string{"/a", "/b"}, "$KUBECONFIG", false},
		{"home", "", "", home, []string{"/home/u/.kube/config"}, "~/.kube/config", false},
		{"relative made absolute", "rel/config", "", home, []string{filepath.Join(wd, "rel/config")}, "--kubeconfig", false},
		{"nothing", "", "", noHome, nil, "", true},
		{"empty list", "", ":", home, nil, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := func(k string) string {
				if k == "KUBECONFIG" {
					return c.env
				}
				return ""
			}
			got, err := ResolveTarget(c.flag, "ctx", env, c.home)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if err == nil && (!slices.Equal(got.Files, c.wantFiles) || got.Source != c.wantSource || got.Context != "ctx") {
				t.Errorf("got %+v, want files %v from %s", got, c.wantFiles, c.wantSource)
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig with contexts kind-a (current) and kind-b.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, n := range []string{"a", "b"} {
		cfg.Clusters["kind-"+n] = &clientcmdapi.Cluster{Server: "https://" + n + ".example:6443"}
		cfg.AuthInfos["kind-"+n] = &clientcmdapi.AuthInfo{Token: "token-" + n}
		cfg.Contexts["kind-"+n] = &clientcmdapi.Context{Cluster: "kind-" + n, AuthInfo: "kind-" + n}
	}
	cfg.CurrentContext = "kind-a"
	p := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSuiteKubeconfig: one file and no context is handed over as it is; a context gives
// the suite a file holding that context alone, as its current one; an unknown context is an
// error naming it.
func TestSuiteKubeconfig(t *testing.T) {
	kc := writeKubeconfig(t)
	dir := t.TempDir()
	if p, err := (Target{Files: []string{kc}}).SuiteKubeconfig(dir); err != nil || p != kc {
		t.Fatalf("no context: %q, %v; want %s itself", p, err, kc)
	}
	p, err := (Target{Files: []string{kc}, Context: "kind-b"}).SuiteKubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := clientcmd.LoadFromFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != "kind-b" || len(got.Contexts) != 1 || got.Clusters["kind-b"].Server != "https://b.example:6443" {
		t.Errorf("suite kubeconfig: current %q, %d contexts", got.CurrentContext, len(got.Contexts))
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("suite kubeconfig mode: %v, %v", st.Mode(), err)
	}
	cfg, err := (Target{Files: []string{kc}, Context: "kind-b"}).RESTConfig()
	if err != nil || cfg.Host != "https://b.example:6443" {
		t.Errorf("RESTConfig host %v, %v", cfg, err)
	}
	if _, err := (Target{Files: []string{kc}, Context: "nope"}).SuiteKubeconfig(dir); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown context: %v", err)
	}
}
