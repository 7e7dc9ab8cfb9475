// The enrollment file: the pods the CNI plugin set up, persisted across agent restarts (the
// plugin runs once per sandbox; a restarted agent must still bind their listeners).

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aether-mesh/svclb/internal/enroll"
)

type enrollFile struct {
	Version int          `json:"version"`
	Pods    []enroll.Pod `json:"pods"`
}

const enrollFileVersion = 1

// restore loads the file a previous run saved; capturedPods then drops the pods that are gone.
func (e *enrollment) restore() {
	if e.file == "" {
		return
	}
	b, err := os.ReadFile(e.file)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var f enrollFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err == nil && f.Version != enrollFileVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, enrollFileVersion)
	}
	if err != nil {
		e.log.Error("starting with no CNI-enrolled pods: their listeners return when the pods are recreated", "file", e.file, "error", err)
		return
	}
	e.mu.Lock()
	for _, p := range f.Pods {
		if p.UID != "" {
			e.byUID[p.UID] = p
		}
	}
	e.mu.Unlock()
}

// save writes the enrolled pods atomically (temp file, rename); a failure is logged and the
// next change retries.
func (e *enrollment) save() {
	if e.file == "" {
		return
	}
	e.mu.Lock()
	f := enrollFile{Version: enrollFileVersion, Pods: make([]enroll.Pod, 0, len(e.byUID))}
	for _, p := range e.byUID {
		f.Pods = append(f.Pods, p)
	}
	e.mu.Unlock()
	slices.SortFunc(f.Pods, func(a, b enroll.Pod) int { return strings.Compare(a.UID, b.UID) })
	if err := writeAtomic(e.file, f); err != nil {
		e.log.Error("could not save the CNI-enrolled pods", "file", e.file, "error", err)
	}
}

func writeAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
