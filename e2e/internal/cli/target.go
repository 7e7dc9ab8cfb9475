package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Target is the cluster a command works on: which kubeconfig, which context, and why.
type Target struct {
	// Files are the kubeconfig files, merged by kubectl's rules when there are several.
	Files []string
	// Source says where Files came from: "--kubeconfig", "$KUBECONFIG" or "~/.kube/config".
	Source string
	// Context is the context to use; "" is the kubeconfig's current context.
	Context string
}

// ResolveTarget applies the precedence: the --kubeconfig flag, else $KUBECONFIG (a list of
// files, as kubectl reads it), else ~/.kube/config. getenv and home are os.Getenv and
// os.UserHomeDir in the command (tests pass their own).
func ResolveTarget(flagKubeconfig, flagContext string, getenv func(string) string, home func() (string, error)) (Target, error) {
	t := Target{Context: flagContext}
	switch {
	case flagKubeconfig != "":
		t.Files, t.Source = []string{flagKubeconfig}, "--kubeconfig"
	case getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		for _, f := range filepath.SplitList(getenv(clientcmd.RecommendedConfigPathEnvVar)) {
			if f != "" {
				t.Files = append(t.Files, f)
			}
		}
		t.Source = "$" + clientcmd.RecommendedConfigPathEnvVar
	default:
		h, err := home()
		if err != nil {
			return t, fmt.Errorf("no --kubeconfig, no $KUBECONFIG and no home directory for ~/.kube/config: %w", err)
		}
		t.Files, t.Source = []string{filepath.Join(h, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}, "~/.kube/config"
	}
	if len(t.Files) == 0 {
		return t, errors.New("$KUBECONFIG lists no file")
	}
	// Absolute: the suite binary runs in <repo>/e2e, not where the command was given.
	for i, f := range t.Files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return t, fmt.Errorf("kubeconfig %s: %w", f, err)
		}
		t.Files[i] = abs
	}
	return t, nil
}

func (t Target) loader() clientcmd.ClientConfig {
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: t.Files}
	if len(t.Files) == 1 {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: t.Files[0]}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.Context})
}

// String names the target for the log: files, source and context.
func (t Target) String() string {
	ctx := t.Context
	if ctx == "" {
		ctx = "current context"
		if raw, err := t.loader().RawConfig(); err == nil && raw.CurrentContext != "" {
			ctx = "current context " + raw.CurrentContext
		}
	}
	return fmt.Sprintf("kubeconfig %s (%s), %s", filepath.Join(t.Files...), t.Source, ctx)
}

// RESTConfig is the client configuration of the target.
func (t Target) RESTConfig() (*rest.Config, error) {
	cfg, err := t.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return cfg, nil
}

// Clientset is a clientset for the target.
func (t Target) Clientset() (kubernetes.Interface, *rest.Config, error) {
	cfg, err := t.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("clientset: %w", err)
	}
	return cs, cfg, nil
}

// SuiteKubeconfig is the one file the suite binary reads with its current context
// (SVCLB_KUBECONFIG): the single file itself when no context is chosen, else a minified,
// flattened copy holding only the chosen context, written into dir (mode 0600, with the
// credentials it carries; the caller removes dir).
func (t Target) SuiteKubeconfig(dir string) (string, error) {
	if len(t.Files) == 1 && t.Context == "" {
		return t.Files[0], nil
	}
	raw, err := t.loader().RawConfig()
	if err != nil {
		return "", fmt.Errorf("%s: %w", t, err)
	}
	if t.Context != "" {
		if _, ok := raw.Contexts[t.Context]; !ok {
			return "", fmt.Errorf("%s: no context %q", t, t.Context)
		}
		raw.CurrentContext = t.Context
	}
	if err := clientcmdapi.MinifyConfig(&raw); err != nil {
		return "", fmt.Errorf("%s: %w", t, err)
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return "", fmt.Errorf("%s: %w", t, err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(raw, path); err != nil {
		return "", fmt.Errorf("write the suite's kubeconfig: %w", err)
	}
	return path, os.Chmod(path, 0o600)
}
