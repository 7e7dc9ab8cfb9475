// The namespace view: which namespaces the selector enrolls, published in a file for the CNI
// plugin (enroll.NamespaceView), so that the pods of the others start while the agent is down.

package agent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
)

// viewRetry is the wait before a failed write is tried again.
const viewRetry = 5 * time.Second

// namespaceView writes the view whenever what it says changes.
type namespaceView struct {
	log   *slog.Logger
	file  string
	build func() *enroll.NamespaceView // the view now (no generation, no time)
	poke  chan struct{}

	mu      sync.Mutex // publish, from start-up and the loop
	written *enroll.NamespaceView
	err     error
}

// newNamespaceView publishes build's view at file; nil (publishing nothing) when file is empty.
func newNamespaceView(log *slog.Logger, file string, build func() *enroll.NamespaceView) *namespaceView {
	if file == "" {
		return nil
	}
	return &namespaceView{log: log, file: file, build: build, poke: make(chan struct{}, 1)}
}

// changed says the view may differ (a namespace or the selector changed); the loop writes it.
func (w *namespaceView) changed() {
	if w == nil {
		return
	}
	select {
	case w.poke <- struct{}{}:
	default: // a write is already due: it reads the view then
	}
}

// run writes the view now, from the synced informers, and then on every change until ctx ends.
func (w *namespaceView) run(ctx context.Context) {
	if w == nil {
		return
	}
	w.publish()
	go func() {
		for {
			var retry <-chan time.Time
			if w.failed() {
				retry = time.After(viewRetry)
			}
			select {
			case <-ctx.Done():
				return
			case <-w.poke:
			case <-retry:
			}
			w.publish()
		}
	}()
}

func (w *namespaceView) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// publish writes the view if it differs from the last one written. The first write of a run
// continues the generation of the file a previous run left, so generations only grow.
func (w *namespaceView) publish() {
	v := w.build()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written != nil && w.err == nil && w.written.SameNamespaces(v) {
		return
	}
	v.Version = enroll.NamespaceViewVersion
	if w.written != nil {
		v.Generation = w.written.Generation + 1
	} else if old, err := enroll.ReadNamespaceView(w.file); err == nil {
		v.Generation = old.Generation + 1
	} else {
		v.Generation = 1
	}
	v.WrittenAt = time.Now().UTC().Truncate(time.Millisecond)
	err := enroll.WriteNamespaceView(w.file, v)
	if err != nil {
		// A view the agent could not replace would go on deciding pods it no longer describes.
		if rerr := os.Remove(w.file); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		if w.err == nil {
			w.log.Error("could not publish the enrolled namespaces: the CNI plugin asks the agent about every pod, and fails while it is down",
				"file", w.file, "error", err)
		}
		w.err = err
		return
	}
	attrs := []any{"file", w.file, "generation", v.Generation, "selector", v.Selector, "enrolled", len(v.Enrolled), "not-enrolled", len(v.NotEnrolled)}
	switch {
	case w.err != nil:
		w.log.Info("published the enrolled namespaces again", attrs...)
	case w.written == nil || w.written.Selector != v.Selector:
		w.log.Info("published the enrolled namespaces", attrs...)
	default:
		w.log.Debug("published the enrolled namespaces", attrs...)
	}
	w.written, w.err = v, nil
}

// status is the /status view; nil when nothing is published.
func (w *namespaceView) status() *agentstatus.NamespaceViewStatus {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &agentstatus.NamespaceViewStatus{File: w.file}
	if w.written != nil {
		st.Generation, st.WrittenAt = w.written.Generation, w.written.WrittenAt
	}
	if w.err != nil {
		st.Error = w.err.Error()
	}
	return st
}
