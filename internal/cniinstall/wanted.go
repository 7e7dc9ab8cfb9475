package cniinstall

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// InstallerWanted tells, when the installer is stopped, whether the plugin is still wanted on
// the node: a rolling update, a drain or an eviction stops the installer too, and removing
// the plugin then would let enrolled pods start uncaptured while the node pod is away. Only
// when the DaemonSet is gone, being deleted, or no longer runs the installer container, or
// the apiserver refuses or no longer authorizes our ServiceAccount, is it an uninstall.
type InstallerWanted struct {
	APIServer string // https://host:port
	Token     string
	// TokenFile, when set, is read at each call instead of Token: the kubelet rotates a
	// projected token, and a stale copy's 401 would read as an uninstall.
	TokenFile string
	CAPool    *x509.CertPool
	Namespace string
	DaemonSet string
	Container string // the installer's container name in the DaemonSet's pod template
}

// InClusterWanted reads the service account's credentials.
func InClusterWanted(namespace, daemonSet, container string) (*InstallerWanted, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("cniinstall: not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)")
	}
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	token := filepath.Join(dir, "token")
	if _, err := os.ReadFile(token); err != nil {
		return nil, fmt.Errorf("cniinstall: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("cniinstall: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("cniinstall: no certificate in %s/ca.crt", dir)
	}
	return &InstallerWanted{APIServer: "https://" + net.JoinHostPort(host, port), TokenFile: token, CAPool: pool,
		Namespace: namespace, DaemonSet: daemonSet, Container: container}, nil
}

// daemonSet is the part of a DaemonSet the decision reads.
type daemonSet struct {
	Metadata struct {
		DeletionTimestamp *time.Time `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				InitContainers []struct {
					Name string `json:"name"`
				} `json:"initContainers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// Wanted reports whether the plugin must stay. Any other error (the apiserver unreachable) keeps it:
// a plugin left behind fails ADDs until someone looks, an uncaptured pod fails silently.
func (w *InstallerWanted) Wanted(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/apis/apps/v1/namespaces/%s/daemonsets/%s", w.APIServer, w.Namespace, w.DaemonSet)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return true, err
	}
	token := w.Token
	if w.TokenFile != "" {
		b, err := os.ReadFile(w.TokenFile)
		if err != nil {
			return true, fmt.Errorf("cniinstall: service account token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.CAPool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Do(req)
	if err != nil {
		return true, fmt.Errorf("cniinstall: get DaemonSet %s/%s: %w", w.Namespace, w.DaemonSet, err)
	}
	defer resp.Body.Close()
	// Only an answer about the DaemonSet or our credentials removes the plugin; anything that
	// may just be the control plane unavailable (5xx, 429 throttling, a timeout, a refused
	// connection) keeps it, or a blip during a rolling update would open the uncaptured window.
	// Unexpected codes keep it too (410 on a GET is not "deleted"; other 4xx say nothing of it).
	switch resp.StatusCode {
	case http.StatusNotFound:
		return false, nil
	case http.StatusForbidden:
		// The permission to read the DaemonSet comes with the CNI option (its Role rule): a
		// DaemonSet re-rendered without CNI withdraws it before this pod stops.
		return false, nil
	case http.StatusUnauthorized:
		// The token is read afresh and a pod-bound token outlives its pod's graceful stop by a
		// minute, so a refusal means the ServiceAccount is gone: the install is being torn
		// down, and keeping would leave every node a plugin that refuses new pods. (A
		// force-deleted pod's token is refused too; the DaemonSet's next pod reinstalls.)
		return false, nil
	case http.StatusOK:
	default:
		return true, fmt.Errorf("cniinstall: get DaemonSet %s/%s: %s", w.Namespace, w.DaemonSet, resp.Status)
	}
	var ds daemonSet
	if err := json.NewDecoder(resp.Body).Decode(&ds); err != nil {
		return true, fmt.Errorf("cniinstall: decode DaemonSet %s/%s: %w", w.Namespace, w.DaemonSet, err)
	}
	if ds.Metadata.DeletionTimestamp != nil {
		return false, nil
	}
	for _, c := range ds.Spec.Template.Spec.InitContainers {
		if c.Name == w.Container {
			return true, nil
		}
	}
	return false, nil
}
