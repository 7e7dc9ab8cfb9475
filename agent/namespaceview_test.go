package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aether-mesh/svclb/agent"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// publishedView is the agent's namespace view as the CNI plugin reads it, spelled out: the
// file is a contract between two binaries of different releases.
type publishedView struct {
	Version     int       `json:"version"`
	Selector    string    `json:"selector"`
	Generation  uint64    `json:"generation"`
	WrittenAt   time.Time `json:"writtenAt"`
	Enrolled    []string  `json:"enrolled"`
	NotEnrolled []string  `json:"notEnrolled"`
}

// TestEnrollmentPublishesNamespaces: the agent writes which namespaces its selector enrolls,
// and every other one it knows, before it serves the plugin; it rewrites the file when a
// namespace is relabelled or created and when the ConfigMap moves the selector, each time with
// a higher generation, which a restarted agent continues.
func TestEnrollmentPublishesNamespaces(t *testing.T) {
	rc, c, ctx, must := startAPIServer(t)
	g := gomega.NewWithT(t)
	createNamespace(ctx, t, c, "mesh", map[string]string{contract.MeshLabel: contract.MeshEnabled})
	createNamespace(ctx, t, c, "plain", nil)
	createNamespace(ctx, t, c, "team-b", map[string]string{"team": "b"})

	dir := t.TempDir()
	viewFile := filepath.Join(dir, "state", "namespaces.json")
	cfg := agent.Config{NodeName: node, RestConfig: rc, XDSSocket: filepath.Join(dir, "xds.sock"), NetnsDir: t.TempDir(),
		Debounce: 10 * time.Millisecond, EnrollSocket: filepath.Join(dir, "cni", "enroll.sock"),
		EnrollFile: filepath.Join(dir, "state", "enrolled.json"), EnrollNamespacesFile: viewFile}
	started := time.Now()
	addr, stop := startAgent(ctx, t, cfg)
	read := func() publishedView {
		t.Helper()
		var v publishedView
		b, err := os.ReadFile(viewFile)
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		if err != nil {
			t.Fatalf("the agent's namespace view: %v", err)
		}
		return v
	}

	// Written before the agent serves the plugin: a pod it would be asked about is already in it.
	v := read()
	g.Expect(v.Version).To(gomega.Equal(1))
	g.Expect(v.Selector).To(gomega.Equal(contract.DefaultNamespaceSelector))
	g.Expect(v.Enrolled).To(gomega.Equal([]string{"mesh"}))
	g.Expect(v.NotEnrolled).To(gomega.ContainElements("default", "kube-system", contract.Namespace, "plain", "team-b"))
	g.Expect(v.NotEnrolled).NotTo(gomega.ContainElement("mesh"))
	g.Expect(slices.IsSorted(v.NotEnrolled)).To(gomega.BeTrue(), "notEnrolled sorted: %v", v.NotEnrolled)
	g.Expect(v.Generation).To(gomega.BeNumerically(">", 0))
	g.Expect(v.WrittenAt).To(gomega.BeTemporally(">=", started.Add(-time.Second)))
	last := v.Generation
	g.Expect(status(t, addr).Enrollment.NamespaceView).To(gomega.Equal(&agentstatus.NamespaceViewStatus{File: viewFile, Generation: last, WrittenAt: v.WrittenAt}))

	// A namespace relabelled into the selector.
	must(c.CoreV1().Namespaces().Patch(ctx, "plain", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+contract.MeshLabel+`":"`+contract.MeshEnabled+`"}}}`), metav1.PatchOptions{}))
	g.Eventually(func() []string { return read().Enrolled }).WithTimeout(10*time.Second).Should(gomega.Equal([]string{"mesh", "plain"}),
		"plain relabelled enabled")
	v = read()
	g.Expect(v.NotEnrolled).NotTo(gomega.ContainElement("plain"))
	g.Expect(v.Generation).To(gomega.BeNumerically(">", last))
	last = v.Generation

	// A namespace created later is known to be not enrolled.
	createNamespace(ctx, t, c, "later", nil)
	g.Eventually(func() []string { return read().NotEnrolled }).WithTimeout(10 * time.Second).Should(gomega.ContainElement("later"))
	g.Expect(read().Generation).To(gomega.BeNumerically(">", last))

	// The ConfigMap moves the selector.
	must(c.CoreV1().ConfigMaps(contract.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: contract.AgentConfigMap},
		Data: map[string]string{contract.KeyNamespaceSelector: "team=b"}}, metav1.CreateOptions{}))
	g.Eventually(func() string { return read().Selector }).WithTimeout(10 * time.Second).Should(gomega.Equal("team=b"))
	v = read()
	g.Expect(v.Enrolled).To(gomega.Equal([]string{"team-b"}))
	g.Expect(v.NotEnrolled).To(gomega.ContainElements("mesh", "plain", "later"))
	last = v.Generation

	// A restarted agent writes its own view at once, continuing the generation.
	stop()
	_, _ = startAgent(ctx, t, cfg)
	v = read()
	g.Expect(v.Generation).To(gomega.BeNumerically(">", last))
	g.Expect(v.Selector).To(gomega.Equal("team=b"))
	g.Expect(v.Enrolled).To(gomega.Equal([]string{"team-b"}))
}
