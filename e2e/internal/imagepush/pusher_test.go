package imagepush

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/internal/testing/testenv/prereq"
)

// TestPushToRegistry pushes a tiny image through Push to a real registry (Debian's
// docker-registry, on loopback, which Docker takes over plain HTTP) and reads it back from
// the registry's tag list; a required image the engine lacks stops Push before any push.
func TestPushToRegistry(t *testing.T) {
	docker := prereq.Command(t, "docker")
	if out, err := exec.Command(docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		prereq.Missing(t, "needs a running Docker engine: docker info: %v: %s", err, bytes.TrimSpace(out))
	}
	registry := startRegistry(t, prereq.Command(t, "docker-registry"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	name := "pushtest-" + randomHex(t)
	local := images.Local(name)
	importImage(t, docker, local)
	to, err := images.Parse(registry)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", to.Ref(name)).Run() })

	var log bytes.Buffer
	p := &Pusher{Docker: docker, Out: &log}
	got, err := p.Push(ctx, to, []string{name}, []string{"pushtest-never-built"})
	if err != nil {
		t.Fatalf("Push: %v\n%s", err, log.String())
	}
	if len(got) != 1 || got[0].Ref != registry+"/"+local || !strings.HasPrefix(got[0].Digest, "sha256:") {
		t.Errorf("Push = %+v", got)
	}
	for _, want := range []string{"(1/1) push " + local + " as " + to.Ref(name), "(1/1) pushed " + to.Ref(name) + " (sha256:",
		"skip " + images.Local("pushtest-never-built") + ": not built"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.String())
		}
	}
	var tags struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	resp, err := http.Get("http://" + registry + "/v2/svclb/" + name + "/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&tags); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("tags list: %s, %v", resp.Status, err)
	}
	if tags.Name != "svclb/"+name || !slices.Contains(tags.Tags, "dev") {
		t.Errorf("the registry holds %+v, want svclb/%s tagged dev", tags, name)
	}

	log.Reset()
	_, err = p.Push(ctx, to, []string{name, "pushtest-missing"}, nil)
	if err == nil || !strings.Contains(err.Error(), images.Local("pushtest-missing")+" (make images builds them)") {
		t.Errorf("a missing image: %v", err)
	}
	if strings.Contains(log.String(), "push ") {
		t.Errorf("pushed although an image is missing:\n%s", log.String())
	}
}

// startRegistry runs the registry on a free loopback port until the test ends and returns
// its host:port once /v2/ answers.
func startRegistry(t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	config := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("exited: %s", out.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("registry on %s: %v", addr, err)
	}
	return addr
}

// importImage makes image in the local engine from a one-file tarball, removed at the end.
func importImage(t *testing.T, docker, image string) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	body := []byte("svclb push test\n")
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(docker, "import", "-", image)
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import %s: %v: %s", image, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", image).Run() })
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
