// The demand file: the admitted on-demand names persisted across restarts.

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/aether-mesh/svclb/internal/statefile"
)

// demandFileVersion is the "version" of the demand file format.
const demandFileVersion = 1

// demandFile is the on-disk form of the admitted set.
type demandFile struct {
	Version  int      `json:"version"`
	Clusters []string `json:"clusters"`
}

// maxDemandFile bounds the demand file read at start-up: room for a million admitted names of
// the longest form (svc:255.255.255.255:65535), far past any --on-demand-max that fits a node.
const maxDemandFile = 32 << 20

// loadDemandFile reads the admitted names a previous run saved. A missing file is an empty
// demand. A file that is not a regular file, is too large or does not parse is an error, and
// it is renamed to <file>.corrupt (kept for a post-mortem, out of the way of the next save).
func loadDemandFile(path string) ([]string, error) {
	b, err := statefile.Read(path, maxDemandFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var f demandFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err == nil && f.Version != demandFileVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, demandFileVersion)
	}
	if err != nil {
		to, rerr := statefile.MoveAside(path)
		if rerr != nil {
			return nil, fmt.Errorf("demand file %s cannot be used (%w) and could not be moved aside: %w", path, err, rerr)
		}
		return nil, fmt.Errorf("demand file %s cannot be used, moved to %s: %w", path, to, err)
	}
	return f.Clusters, nil
}

// saveDemandFile writes names atomically: a reader (or a crash) sees the old file or the new
// one, never a torn write.
func saveDemandFile(path string, names []string) error {
	slices.Sort(names)
	b, err := json.Marshal(demandFile{Version: demandFileVersion, Clusters: names})
	if err != nil {
		return fmt.Errorf("encode demand file: %w", err)
	}
	return statefile.WriteAtomic(path, append(b, '\n'))
}

// restoreDemand loads the demand file for the first sync to re-classify. Call it after the
// informer caches synced and before the first sync, so that snapshot already carries them.
func (s *syncer) restoreDemand() {
	if s.demand.file == "" {
		return
	}
	names, err := loadDemandFile(s.demand.file)
	if err != nil {
		s.log.Error("starting with no on-demand clusters", "error", err)
		return
	}
	s.mu.Lock()
	s.restored = names
	s.mu.Unlock()
}

// saveDemand writes the admitted set if it changed; a failure is retried after the next sync.
func (s *syncer) saveDemand() {
	d := s.demand
	if !d.changed || d.file == "" {
		return
	}
	names := make([]string, 0, len(d.admitted))
	for n := range d.admitted {
		names = append(names, n)
	}
	if err := saveDemandFile(d.file, names); err != nil {
		s.log.Error("could not save on-demand clusters; retrying after the next sync", "file", d.file, "error", err)
		return
	}
	d.changed = false
}
