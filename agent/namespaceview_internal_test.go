package agent

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/internal/enroll"
)

// TestNamespaceViewWriteFailureRemovesTheFile: a view the agent cannot write (here: over the
// bound the plugin reads) removes the one it wrote before, so the plugin asks the agent rather
// than follow a view the agent no longer holds; /status says why; the next write puts it back.
func TestNamespaceViewWriteFailureRemovesTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "namespaces.json")
	var next *enroll.NamespaceView
	w := newNamespaceView(slog.New(slog.DiscardHandler), file, func() *enroll.NamespaceView {
		v := *next
		return &v
	})
	small := &enroll.NamespaceView{Selector: "a=b", Enrolled: []string{"mesh"}, NotEnrolled: []string{"plain"}}
	next = small
	w.publish()
	if v, err := enroll.ReadNamespaceView(file); err != nil || v.Generation != 1 {
		t.Fatalf("first view: %+v %v", v, err)
	}
	w.publish() // unchanged: not rewritten
	if st := w.status(); st.Generation != 1 || st.Error != "" {
		t.Fatalf("status after an unchanged view: %+v", st)
	}

	huge := &enroll.NamespaceView{Selector: "a=b"}
	for len(huge.NotEnrolled)*60 < enroll.MaxNamespaceViewBytes {
		huge.NotEnrolled = append(huge.NotEnrolled, strings.Repeat("n", 60))
	}
	next = huge
	w.publish()
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after a failed write the old view is still there (%v)", err)
	}
	if st := w.status(); !strings.Contains(st.Error, "more than") || !w.failed() {
		t.Errorf("status after a failed write: %+v", st)
	}

	next = small
	w.publish()
	v, err := enroll.ReadNamespaceView(file)
	if err != nil || v.Generation != 2 || w.failed() {
		t.Fatalf("after the retry: %+v %v (failed=%v)", v, err, w.failed())
	}
}
