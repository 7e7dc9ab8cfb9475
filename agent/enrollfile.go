// The enrollment file: the pods the CNI plugin set up, persisted across agent restarts (the
// plugin runs once per sandbox; a restarted agent must still bind their listeners).

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/statefile"
)

type enrollFile struct {
	Version int          `json:"version"`
	Pods    []enroll.Pod `json:"pods"`
}

const enrollFileVersion = 1

// maxEnrollFile bounds the enrollment file read at start-up: thousands of pods' records, far
// more than a node runs.
const maxEnrollFile = 4 << 20

// restore loads the file a previous run saved; capturedPods then drops the pods that are gone.
// A file that cannot be used starts the agent with no enrolled pods (their listeners return
// when the pods are recreated) and is moved aside for a post-mortem. A record whose netns path
// is not a pod's network namespace is dropped, never bound.
func (e *enrollment) restore() {
	if e.file == "" {
		return
	}
	b, err := statefile.Read(e.file, maxEnrollFile)
	if errors.Is(err, fs.ErrNotExist) {
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
		if to, rerr := statefile.MoveAside(e.file); rerr != nil {
			err = fmt.Errorf("%w (and it could not be moved aside: %w)", err, rerr)
		} else {
			err = fmt.Errorf("%w (moved to %s)", err, to)
		}
		e.log.Error("starting with no CNI-enrolled pods: their listeners return when the pods are recreated", "file", e.file, "error", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range f.Pods {
		if p.UID == "" {
			continue
		}
		if err := enroll.CheckNetns(p.Netns); err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // else the sandbox went while the agent was down
				e.log.Error("dropping a CNI-enrolled pod whose netns is not a pod's", "file", e.file, "pod", p.String(), "error", err)
			}
			continue
		}
		e.byUID[p.UID] = p
	}
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
	b, err := json.Marshal(f)
	if err == nil {
		err = statefile.WriteAtomic(e.file, append(b, '\n'))
	}
	if err != nil {
		e.log.Error("could not save the CNI-enrolled pods", "file", e.file, "error", err)
	}
}
